package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
)

// peerQuiet is how long a peer's port may stay silent before it counts as in its bootstrap: a serving etcd answers
// within milliseconds, a loaded machine's a little later; a peer taken for silent only costs another look.
const peerQuiet = 100 * time.Millisecond

// peerState is what a peer's port says of the peer, before this member's etcd first starts.
type peerState int

const (
	peerAbsent        peerState = iota // nothing listens (its etcd has not started) or its name does not resolve
	peerBootstrapping                  // it accepts connections but answers nothing: etcd between opening its listeners and serving
	peerServing                        // it answers
)

func (s peerState) String() string {
	return [...]string{"absent", "bootstrapping", "serving"}[s]
}

// peerStateOf connects to a peer URL's host and port, sends a line, and reads: any answer (bytes, a close, a
// reset; a TLS listener answers an HTTP line with an error, a plain one a TLS hello) is a serving peer, silence
// for quiet is one in its bootstrap.
func peerStateOf(peerURL string, quiet time.Duration) peerState {
	u, err := url.Parse(peerURL)
	if err != nil || u.Host == "" {
		return peerAbsent
	}
	conn, err := net.DialTimeout("tcp", u.Host, quiet)
	if err != nil {
		return peerAbsent
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(quiet))
	if _, err := conn.Write([]byte("GET /members HTTP/1.0\r\n\r\n")); err != nil {
		return peerServing // reset: something answered
	}
	var b [1]byte
	var netErr net.Error
	if _, err := conn.Read(b[:]); errors.As(err, &netErr) && netErr.Timeout() {
		return peerBootstrapping
	}
	return peerServing // bytes, a close or a reset
}

// awaitPeersBootstrapped waits, before a member of a new cluster first starts etcd, until every member ranked
// before it (peers) serves on its peer port, or for at most limit; it returns what it waited for, for the log.
//
// Why: etcd opens its peer listener and then, bootstrapping a new cluster, asks every other member whether it
// has been bootstrapped already, with a timeout of a second per member (isMemberBootstrapped, BootstrapTimeout,
// which no flag sets), before it serves on that listener. Members started together each find the others'
// listeners open and silent, and each waits out a second per peer: 2 s of every 3-member create, 4 s of a
// 5-member one (etcd 3.5 and 3.6, measured on the test bed). A peer that is absent refuses at once, and one that
// serves answers at once; so the members start in rank order, each after the ones before it serve (tens of
// milliseconds each), and none of them waits. A peer ranked before that is absent is waited for too: the members'
// containers start within milliseconds of each other (each waited for every peer's address in DNS, so every
// peer's Pod is up), and one that went at once, before its elders had opened their listeners, bootstrapped beside
// them and waited etcd's second per peer after all (the 3-member create's 6.3 s against 4.8 s, 2026-11-27). The rank
// breaks the symmetry (the first never waits); the limit bounds the wait on a peer that does not come to serve,
// after which etcd's own second per silent peer applies.
func awaitPeersBootstrapped(peers []string, limit, every time.Duration) string {
	if len(peers) == 0 {
		return ""
	}
	start := time.Now()
	waited := false
	for {
		var pending []string
		for _, p := range peers {
			if state := peerStateOf(p, peerQuiet); state != peerServing {
				pending = append(pending, fmt.Sprintf("%s (%s)", p, state))
			}
		}
		switch {
		case len(pending) == 0 && !waited:
			return ""
		case len(pending) == 0:
			return fmt.Sprintf("members ranked before this one serve after %s", time.Since(start).Round(time.Millisecond))
		case time.Since(start) >= limit:
			return fmt.Sprintf("%s not serving after %s: starting etcd anyway", strings.Join(pending, ", "), limit)
		}
		waited = true
		time.Sleep(every)
	}
}

// logBootstrapWait writes what awaitPeersBootstrapped waited for, if anything, to the container's log.
func logBootstrapWait(what string) {
	if what != "" {
		fmt.Fprintf(os.Stderr, "steward-agent: %s\n", what)
	}
}
