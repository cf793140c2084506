package agentjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/resources"
)

// The long-running agents (a continuous-backup follower, a standby's applier) report at GET :8080/status; the
// controllers read those reports into status.

// reportClient reads agents' reports; short, since a pass must not wait on an agent that hangs.
var reportClient = &http.Client{Timeout: 2 * time.Second}

// ErrNoReadyPod means no Pod of the agent is ready to report (none yet, or all going).
var ErrNoReadyPod = errors.New("no ready Pod")

// ReadReport asks the first ready Pod with labels in namespace for its report, through read (given the Pod's IP).
func ReadReport(ctx context.Context, c client.Reader, namespace string, labels map[string]string, read func(ctx context.Context, podIP string) error) error {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		return fmt.Errorf("list Pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil || !resources.PodReady(p) {
			continue
		}
		if err := read(ctx, p.Status.PodIP); err != nil {
			return fmt.Errorf("read the report of Pod %s: %w", p.Name, err)
		}
		return nil
	}
	return ErrNoReadyPod
}

// FetchReport is GET http://<podIP>:8080/status, decoded into v.
func FetchReport(ctx context.Context, podIP string, v any) error {
	url := "http://" + net.JoinHostPort(podIP, strconv.Itoa(resources.FollowerStatusPort)) + "/status"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := reportClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
