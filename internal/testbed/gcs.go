package testbed

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"time"
)

// FakeGCSVersion is the version of the Google Cloud Storage emulator the test bed runs
// (third_party/fake-gcs-server/go.mod).
const FakeGCSVersion = "v1.56.1"

// GCSBucket is the bucket the test bed's GCS emulator has from the start.
const GCSBucket = "steward-backups"

// GCSServer is the test bed's Google Cloud Storage emulator: fake-gcs-server serving a directory of the state
// dir over plain HTTP on the node IP, so that Pods (backup Jobs) and the test process both reach it. It takes
// no credentials: Steward sends none to an http:// endpoint.
type GCSServer struct {
	// Endpoint is the base URL (http://host:port), as a GCSDestination's endpoint takes it.
	Endpoint string
	// Bucket exists from the start.
	Bucket string
	// Root is the directory behind the emulator.
	Root string
}

func fakeGCSSet() binarySet {
	return binarySet{name: "fake-gcs-server", version: FakeGCSVersion, module: "fake-gcs-server",
		packages: []string{"github.com/fsouza/fake-gcs-server"}, ldflags: "-s -w", estimate: "about 2 minutes"}
}

// startGCS starts the GCS emulator on a free port of the node IP and creates its bucket through the JSON API.
func (c *Cluster) startGCS(ctx context.Context) error {
	port, err := freePort(NodeIP)
	if err != nil {
		return err
	}
	s := &GCSServer{Endpoint: fmt.Sprintf("http://%s:%d", NodeIP, port), Bucket: GCSBucket, Root: c.state("gcs")}
	// external-url: resumable uploads continue at the URL the emulator returns, which must be one Pods reach.
	p, err := c.spawnEnv("fake-gcs-server", nil, filepath.Join(c.gcsBin, "fake-gcs-server"),
		"-scheme", "http", "-host", NodeIP, "-port", fmt.Sprint(port), "-external-url", s.Endpoint, "-public-host", fmt.Sprintf("%s:%d", NodeIP, port),
		"-backend", "filesystem", "-filesystem-root", s.Root, "-log-level", "warn")
	if err != nil {
		return err
	}
	create := func(ctx context.Context) error {
		body := bytes.NewBufferString(fmt.Sprintf(`{"name": %q}`, s.Bucket))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/storage/v1/b?project=steward-testbed", body)
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusConflict {
			return fmt.Errorf("create bucket %s: %s", s.Bucket, resp.Status)
		}
		return nil
	}
	if err := c.waitFor(ctx, p, "fake-gcs-server serves "+s.Endpoint+" with bucket "+s.Bucket, 30*time.Second, create); err != nil {
		return err
	}
	c.GCS = s
	return nil
}
