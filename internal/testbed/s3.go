package testbed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// VersityGWVersion is the version of the S3-compatible server the test bed runs (third_party/versitygw/go.mod).
const VersityGWVersion = "v1.8.0"

// S3Bucket is the bucket the test bed's S3 server has from the start.
const S3Bucket = "steward-backups"

// S3Server is the test bed's S3-compatible server: the Versity S3 Gateway serving a directory of the state dir
// over plain HTTP on the node IP, so that Pods (backup Jobs) and the test process both reach it, and a second
// gateway serving the same directory over HTTPS with a certificate from the test bed's own CA.
type S3Server struct {
	// Endpoint is host:port, without scheme (plain HTTP).
	Endpoint string
	// TLSEndpoint is host:port of the HTTPS gateway; CABundle the PEM of the CA its certificate is issued by
	// (no system trusts it).
	TLSEndpoint, CABundle string
	// AccessKeyID and SecretAccessKey are the root credentials, generated at every start.
	AccessKeyID, SecretAccessKey string
	// Bucket exists from the start.
	Bucket string
	// Root is the directory behind the server: <Root>/<bucket>/<key> is each object's file.
	Root string
}

func versityGWSet() binarySet {
	return binarySet{name: "versitygw", version: VersityGWVersion, module: "versitygw",
		packages: []string{"github.com/versity/versitygw/cmd/versitygw"}, ldflags: "-s -w", estimate: "about 3 minutes"}
}

// startS3 starts the S3 server on a free port of the node IP with fresh credentials.
func (c *Cluster) startS3(ctx context.Context) error {
	port, err := freePort(NodeIP)
	if err != nil {
		return err
	}
	s := &S3Server{Endpoint: fmt.Sprintf("%s:%d", NodeIP, port), Bucket: S3Bucket, Root: c.state("s3")}
	if s.AccessKeyID, err = randomHex(10); err != nil {
		return err
	}
	if s.SecretAccessKey, err = randomHex(20); err != nil {
		return err
	}
	// The posix backend serves every top-level directory as a bucket.
	if err := os.MkdirAll(filepath.Join(s.Root, s.Bucket), 0o755); err != nil {
		return err
	}
	tlsPort, err := freePort(NodeIP)
	if err != nil {
		return err
	}
	s.TLSEndpoint = fmt.Sprintf("%s:%d", NodeIP, tlsPort)
	ca, err := os.ReadFile(c.state("pki", "ca.crt"))
	if err != nil {
		return fmt.Errorf("read the test bed's CA: %w", err)
	}
	s.CABundle = string(ca)
	// Credentials go through the environment, not the command line, so they do not show in ps.
	env := []string{"ROOT_ACCESS_KEY_ID=" + s.AccessKeyID, "ROOT_SECRET_ACCESS_KEY=" + s.SecretAccessKey}
	for _, gw := range []struct {
		name, endpoint string
		tls            []string
	}{
		{"versitygw", s.Endpoint, nil},
		{"versitygw-tls", s.TLSEndpoint, []string{"--cert", c.state("pki", "s3.crt"), "--key", c.state("pki", "s3.key")}},
	} {
		args := append(append([]string{"--port", gw.endpoint, "--quiet"}, gw.tls...), "posix", s.Root)
		p, err := c.spawnEnv(gw.name, env, filepath.Join(c.s3Bin, "versitygw"), args...)
		if err != nil {
			return err
		}
		if err := c.waitFor(ctx, p, gw.name+" listens on "+gw.endpoint, 30*time.Second, func(ctx context.Context) error {
			d := net.Dialer{Timeout: time.Second}
			conn, err := d.DialContext(ctx, "tcp", gw.endpoint)
			if err != nil {
				return err
			}
			return conn.Close()
		}); err != nil {
			return err
		}
	}
	c.S3 = s
	return nil
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("read random: %w", err)
	}
	return hex.EncodeToString(b), nil
}
