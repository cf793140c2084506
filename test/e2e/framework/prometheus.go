package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// PromQuery runs an instant PromQL query against the test bed's Prometheus; an invalid query is an error with
// Prometheus' reason.
func PromQuery(ctx context.Context, query string) ([]PromSample, error) {
	return PromQueryAt(ctx, query, time.Time{})
}

// PromQueryAt runs an instant query evaluated at a past time (now when at is zero): what the rules had found then.
func PromQueryAt(ctx context.Context, query string, at time.Time) ([]PromSample, error) {
	if Bed.Prometheus == nil {
		return nil, fmt.Errorf("the test bed runs no Prometheus")
	}
	params := url.Values{"query": {query}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, Bed.Prometheus.URL+"/api/v1/query?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", query, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("query %q: read answer: %w", query, err)
	}
	var answer struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("query %q: HTTP %d, unreadable answer %q: %w", query, resp.StatusCode, body, err)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %q refused: %s: %s", query, answer.ErrorType, answer.Error)
	}
	if answer.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %q: result type %s, want an instant vector", query, answer.Data.ResultType)
	}
	out := make([]PromSample, 0, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v: %w", query, r.Value, err)
		}
		out = append(out, PromSample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// PromSample is one series of an instant query's result.
type PromSample struct {
	Labels map[string]string
	Value  float64
}

// String is the series' labels and value.
func (s PromSample) String() string { return fmt.Sprintf("%v=%g", s.Labels, s.Value) }

// PromSeries accepts a result of n series (any value).
func PromSeries(n int) func([]PromSample) error {
	return func(got []PromSample) error {
		if len(got) != n {
			return fmt.Errorf("got %d series %v, want %d", len(got), got, n)
		}
		return nil
	}
}

// PromValue accepts a result of exactly one series with value want.
func PromValue(want float64) func([]PromSample) error {
	return func(got []PromSample) error {
		if len(got) != 1 || got[0].Value != want {
			return fmt.Errorf("got %v, want one series = %g", got, want)
		}
		return nil
	}
}

// PromSelector is a PromQL label selector for the cluster's series.
func PromSelector(ns, cluster string, more ...string) string {
	return "{" + strings.Join(append([]string{fmt.Sprintf("namespace=%q", ns), fmt.Sprintf("cluster=%q", cluster)}, more...), ",") + "}"
}

// WaitProm polls query until check accepts its result.
func WaitProm(t *testing.T, what string, timeout time.Duration, query string, check func([]PromSample) error) []PromSample {
	t.Helper()
	var got []PromSample
	Poll(t, what+" ("+query+")", timeout, func() error {
		var err error
		if got, err = PromQuery(context.Background(), query); err != nil {
			return err
		}
		return check(got)
	})
	return got
}
