package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
)

// PortForward dials a port of a Pod through the API server's pods/portforward subresource, as `kubectl
// port-forward` does (WebSocket first, SPDY when the server does not offer it), but hands out each stream as a
// net.Conn instead of listening on a local TCP port: nothing on this machine but the proxy can reach the
// member's port.
type PortForward struct {
	Config    *rest.Config
	Namespace string
	Pod       string
	Port      int

	mu     sync.Mutex
	conn   httpstream.Connection
	nextID int
}

// Dial opens a stream to the Pod's port, (re)connecting to the API server when needed. Streams are created
// synchronously on the one API server connection, which outlives any single dial, so no context applies.
func (f *PortForward) Dial(_ context.Context) (net.Conn, error) {
	conn, id, err := f.connection()
	if err != nil {
		return nil, err
	}
	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(f.Port))
	headers.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	errorStream, err := conn.CreateStream(headers)
	if err != nil {
		f.drop(conn)
		return nil, fmt.Errorf("port-forward to pod %s/%s: error stream: %w", f.Namespace, f.Pod, err)
	}
	// Nothing is written to the error stream: the kubelet writes to it when it cannot reach the port.
	_ = errorStream.Close()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		conn.RemoveStreams(errorStream)
		f.drop(conn)
		return nil, fmt.Errorf("port-forward to pod %s/%s: data stream: %w", f.Namespace, f.Pod, err)
	}
	sc := &streamConn{data: data, conn: conn, errorStream: errorStream, remote: fmt.Sprintf("pod/%s:%d", f.Pod, f.Port),
		remoteErr: make(chan error, 1), closed: make(chan struct{})}
	go func() {
		msg, err := io.ReadAll(errorStream)
		switch {
		case err != nil:
			sc.remoteErr <- err
		case len(msg) > 0:
			sc.remoteErr <- errors.New(string(msg))
		}
		close(sc.remoteErr)
	}()
	return sc, nil
}

// Close ends the connection to the API server and with it every stream.
func (f *PortForward) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		return nil
	}
	err := f.conn.Close()
	f.conn = nil
	return err
}

func (f *PortForward) connection() (httpstream.Connection, int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		select {
		case <-f.conn.CloseChan():
			f.conn = nil
		default:
		}
	}
	if f.conn == nil {
		dialer, err := f.dialer()
		if err != nil {
			return nil, 0, err
		}
		conn, protocol, err := dialer.Dial(portforward.PortForwardProtocolV1Name)
		if err != nil {
			return nil, 0, fmt.Errorf("port-forward to pod %s/%s: %w", f.Namespace, f.Pod, err)
		}
		if protocol != portforward.PortForwardProtocolV1Name {
			_ = conn.Close()
			return nil, 0, fmt.Errorf("port-forward to pod %s/%s: the server speaks %q, not %q", f.Namespace, f.Pod, protocol, portforward.PortForwardProtocolV1Name)
		}
		f.conn = conn
	}
	f.nextID++
	return f.conn, f.nextID, nil
}

// drop forgets conn after a failed stream, so that the next Dial connects again.
func (f *PortForward) drop(conn httpstream.Connection) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == conn {
		_ = conn.Close()
		f.conn = nil
	}
}

// dialer is kubectl port-forward's: SPDY tunnelled over WebSocket, falling back to plain SPDY for API servers
// that do not upgrade to WebSocket.
func (f *PortForward) dialer() (httpstream.Dialer, error) {
	core, err := corev1client.NewForConfig(f.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward: %w", err)
	}
	u := core.RESTClient().Post().Resource("pods").Namespace(f.Namespace).Name(f.Pod).SubResource("portforward").URL()
	transport, upgrader, err := spdy.RoundTripperFor(f.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward transport: %w", err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialer(u, f.Config)
	if err != nil {
		return nil, fmt.Errorf("port-forward transport: %w", err)
	}
	return portforward.NewFallbackDialer(ws, spdyDialer, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// streamConn is a port-forward data stream as a net.Conn. Deadlines are not supported by the streams; the
// proxy bounds what needs bounding (the TLS handshake) with contexts instead.
type streamConn struct {
	data, errorStream httpstream.Stream
	conn              httpstream.Connection
	remote            string
	remoteErr         chan error
	closed            chan struct{}
	once              sync.Once
}

// remoteErrorWait is how long a stream that ended waits for the kubelet's reason on the error stream.
const remoteErrorWait = time.Second

func (c *streamConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if errors.Is(err, io.EOF) {
		// The kubelet reports a port it could not reach on the error stream and closes the data stream: say why.
		// Bounded: the error stream may stay open after a normal end, and a closed connection must not hang.
		select {
		case rerr, ok := <-c.remoteErr:
			if ok && rerr != nil {
				return n, fmt.Errorf("%s: %w", c.remote, rerr)
			}
		case <-c.closed:
		case <-time.After(remoteErrorWait):
		}
	}
	return n, err
}

func (c *streamConn) Write(b []byte) (int, error) { return c.data.Write(b) }

func (c *streamConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		// Reset discards unsent data so the stream cannot block the connection's other streams.
		_ = c.data.Reset()
		c.conn.RemoveStreams(c.errorStream, c.data)
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr              { return addr("kubectl-steward") }
func (c *streamConn) RemoteAddr() net.Addr             { return addr(c.remote) }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }

type addr string

func (a addr) Network() string { return "portforward" }
func (a addr) String() string  { return string(a) }
