package testbed

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Eventually calls check every interval until it returns nil, ctx ends, or timeout passes; the error wraps the
// last check's error. Tests and benchmarks wait with it instead of sleeping.
func Eventually(ctx context.Context, timeout, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return fmt.Errorf("not after %s: %w", timeout, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last check: %w)", ctx.Err(), err)
		case <-time.After(interval):
		}
	}
}

// HTTPHealthy returns a check that GETs url and wants 200 OK within a second (etcd's /health, a component's
// /healthz).
func HTTPHealthy(url string) func(context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", url, resp.Status)
		}
		return nil
	}
}
