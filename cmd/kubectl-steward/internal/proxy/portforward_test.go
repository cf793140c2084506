package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
)

// fakeStream is one stream of a fake port-forward connection: reads come from r.
type fakeStream struct {
	headers http.Header
	r       io.Reader
	written strings.Builder
	reset   bool
}

func (s *fakeStream) Read(b []byte) (int, error)  { return s.r.Read(b) }
func (s *fakeStream) Write(b []byte) (int, error) { return s.written.Write(b) }
func (s *fakeStream) Close() error                { return nil }
func (s *fakeStream) Reset() error                { s.reset = true; return nil }
func (s *fakeStream) Headers() http.Header        { return s.headers }
func (s *fakeStream) Identifier() uint32          { return 0 }

// fakeConnection hands out streams whose content the test chose, by stream type.
type fakeConnection struct {
	mu      sync.Mutex
	streams []*fakeStream
	content map[string]func() io.Reader
	removed int
	closed  chan bool
}

func (c *fakeConnection) CreateStream(h http.Header) (httpstream.Stream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &fakeStream{headers: h.Clone(), r: c.content[h.Get(corev1.StreamType)]()}
	c.streams = append(c.streams, s)
	return s, nil
}
func (c *fakeConnection) Close() error                 { return nil }
func (c *fakeConnection) CloseChan() <-chan bool       { return c.closed }
func (c *fakeConnection) SetIdleTimeout(time.Duration) {}
func (c *fakeConnection) RemoveStreams(s ...httpstream.Stream) {
	c.mu.Lock()
	c.removed += len(s)
	c.mu.Unlock()
}

// blocking never returns from Read: an error stream the server keeps open.
type blocking struct{}

func (blocking) Read([]byte) (int, error) { select {} }

func TestPortForwardStreams(t *testing.T) {
	conn := &fakeConnection{closed: make(chan bool), content: map[string]func() io.Reader{
		corev1.StreamTypeError: func() io.Reader { return strings.NewReader("") },
		corev1.StreamTypeData:  func() io.Reader { return strings.NewReader("hello") },
	}}
	f := &PortForward{Namespace: "ns", Pod: "db-aaaaa", Port: 2379, conn: conn}
	for i := 1; i <= 2; i++ {
		c, err := f.Dial(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "hello" {
			t.Errorf("read %q, %v", b, err)
		}
		_ = c.Close()
		_ = c.Close()
	}
	// Each connection is an error stream, then a data stream, with the port and one request ID, as kubectl's.
	if len(conn.streams) != 4 || conn.removed != 4 {
		t.Fatalf("%d streams, %d removed", len(conn.streams), conn.removed)
	}
	for i, s := range conn.streams {
		wantType := corev1.StreamTypeError
		if i%2 == 1 {
			wantType = corev1.StreamTypeData
		}
		if s.headers.Get(corev1.StreamType) != wantType || s.headers.Get(corev1.PortHeader) != "2379" ||
			s.headers.Get(corev1.PortForwardRequestIDHeader) != conn.streams[i-i%2].headers.Get(corev1.PortForwardRequestIDHeader) {
			t.Errorf("stream %d headers %v", i, s.headers)
		}
		if i%2 == 1 && !s.reset {
			t.Errorf("data stream %d was not reset on close", i)
		}
	}
	if conn.streams[0].headers.Get(corev1.PortForwardRequestIDHeader) == conn.streams[2].headers.Get(corev1.PortForwardRequestIDHeader) {
		t.Error("two connections share a request ID")
	}
}

func TestPortForwardReportsTheKubeletsError(t *testing.T) {
	conn := &fakeConnection{closed: make(chan bool), content: map[string]func() io.Reader{
		corev1.StreamTypeError: func() io.Reader { return strings.NewReader("failed to connect to localhost:2379: connection refused") },
		corev1.StreamTypeData:  func() io.Reader { return strings.NewReader("") },
	}}
	c, err := (&PortForward{Namespace: "ns", Pod: "db-aaaaa", Port: 2379, conn: conn}).Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "pod/db-aaaaa:2379: failed to connect to localhost:2379: connection refused") {
		t.Errorf("read error %v", err)
	}
}

// A stream that ended while the server keeps its error stream open must still end: a closed connection never hangs.
func TestPortForwardEndsWithoutErrorStream(t *testing.T) {
	conn := &fakeConnection{closed: make(chan bool), content: map[string]func() io.Reader{
		corev1.StreamTypeError: func() io.Reader { return blocking{} },
		corev1.StreamTypeData:  func() io.Reader { return strings.NewReader("") },
	}}
	c, err := (&PortForward{Namespace: "ns", Pod: "p", Port: 2379, conn: conn}).Dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) || time.Since(start) > 5*remoteErrorWait {
		t.Errorf("read %v after %s", err, time.Since(start))
	}
	_ = c.Close()
	start = time.Now()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) || time.Since(start) > remoteErrorWait/2 {
		t.Errorf("read after close: %v after %s", err, time.Since(start))
	}
}
