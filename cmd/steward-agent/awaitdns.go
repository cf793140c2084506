package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

// awaitDNS is the init container of a bootstrap member: it returns once the cluster DNS has a record for every
// peer host of --initial-cluster, so that etcd's first lookups find them.
//
// Why: the members of a new cluster start at about the same time, and each looks its peers up as it starts. A
// peer whose Pod has no address yet has no record, and the cluster DNS caches that answer (NXDOMAIN) for the
// SOA's minimum TTL: 5 s with CoreDNS's defaults, 30 s with kubeadm's. Every later lookup of that name gets the
// cached "no such host" until it expires, so the members could not reach each other for that long although all
// of them were up. Asking before etcd does would cache the same answer, so this asks with a record type nobody
// else asks for, a new one each time (a cache keys its answers by type): NXDOMAIN says the name is not there
// yet, any other answer that the resolver understood (NOERROR without data) that it is. Only the A and AAAA
// lookups etcd makes then are never answered from a negative cache entry.
//
// With --install-to it first installs the agent, as `install` does, for members whose etcd runs through it: one
// init container instead of two. It only saves time (the install aside): on any error, at the deadline, or when
// the data dir already holds a member (its peers are in its data; a restart), it returns at once and etcd starts
// as it would have.
func awaitDNS(args []string) int {
	fs := flag.NewFlagSet("await-dns", flag.ExitOnError)
	var (
		hosts      memberList
		dataDir    string
		resolvConf string
		timeout    time.Duration
		installTo  string
	)
	fs.Var(&hosts, "host", "a peer host name to wait for (repeatable)")
	fs.StringVar(&dataDir, "data-dir", "", "the member's etcd data dir: a member in it means this is not a first start")
	fs.StringVar(&resolvConf, "resolv-conf", "/etc/resolv.conf", "where the name server is read from")
	fs.DurationVar(&timeout, "timeout", time.Minute, "give up waiting after this long (etcd then starts anyway)")
	fs.StringVar(&installTo, "install-to", "", "first install this agent at this path (etcd's entrypoint, run-etcd), so that one init container does both")
	_ = fs.Parse(args)

	// Installing is not an optimisation like the wait: etcd's container starts through the installed agent.
	if installTo != "" {
		if code := install([]string{"--to=" + installTo}); code != 0 {
			return code
		}
	}
	if dataDir != "" && holdsMember(dataDir) {
		fmt.Println("the data dir holds a member: not a first start, nothing to wait for")
		return 0
	}
	server, err := nameServer(resolvConf)
	if err != nil {
		fmt.Printf("no name server to ask (%v): etcd starts without waiting\n", err)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	begin := time.Now()
	if err := waitForNames(ctx, server, hosts, 100*time.Millisecond); err != nil {
		fmt.Printf("peer names not all in DNS after %s (%v): etcd starts anyway\n", time.Since(begin).Round(time.Millisecond), err)
		return 0
	}
	fmt.Printf("%d peer names in DNS after %s\n", len(hosts), time.Since(begin).Round(time.Millisecond))
	return 0
}

// nameServer is the first name server of a resolv.conf, as host:port.
func nameServer(resolvConf string) (string, error) {
	f, err := os.Open(resolvConf) //nolint:gosec // a flag of the Pod spec Steward writes
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "nameserver" {
			return net.JoinHostPort(fields[1], "53"), nil
		}
	}
	return "", fmt.Errorf("%s names no nameserver", resolvConf)
}

// privateTypes is the number of record types in the private-use range (65280-65534, RFC 6895): no client asks
// for them, so no cache holds an answer for them.
const privateTypes = 255

// waitForNames asks server about every name, every interval, until each exists, each query with the next
// private-use record type.
func waitForNames(ctx context.Context, server string, names []string, interval time.Duration) error {
	pending := map[string]bool{}
	for _, n := range names {
		pending[n] = true
	}
	next := int(random16() % privateTypes)
	var last error
	for {
		for n := range pending {
			qtype := dnsmessage.Type(65280 + next%privateTypes)
			next++
			exists, err := nameExists(ctx, server, n, qtype)
			switch {
			case errors.Is(err, errUnanswerable):
				return fmt.Errorf("%s: %w", n, err) // asking again will not help: start etcd now
			case err != nil:
				last = fmt.Errorf("%s: %w", n, err)
			case exists:
				delete(pending, n)
			default:
				last = fmt.Errorf("%s: no such host yet", n)
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var left []string
			for n := range pending {
				left = append(left, n)
			}
			sort.Strings(left)
			return fmt.Errorf("%d not found: %s; last: %w", len(left), strings.Join(left, ", "), last)
		case <-time.After(interval):
		}
	}
}

// random16 is a random 16-bit number (0 if the system has no randomness to give, which only weakens the ID).
func random16() uint16 {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint16(b[:])
}

// errUnanswered is an answer that says neither that a name exists nor that it does not; errUnanswerable one
// that says the server will not answer such a question (REFUSED, NOTIMP, FORMERR: a name server that does not
// take unknown record types), so that waiting is pointless.
var (
	errUnanswered   = errors.New("no usable answer")
	errUnanswerable = errors.New("the name server does not answer this kind of question")
)

// nameExists asks server once, over UDP, for name's records of type qtype: false on NXDOMAIN, true on any
// success (with or without records of that type).
func nameExists(ctx context.Context, server, name string, qtype dnsmessage.Type) (bool, error) {
	fqdn, err := dnsmessage.NewName(strings.TrimSuffix(name, ".") + ".")
	if err != nil {
		return false, err
	}
	id := random16() // unpredictable, so that a forged answer is hard to pass off as this one's
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: id, RecursionDesired: true})
	if err := b.StartQuestions(); err != nil {
		return false, err
	}
	if err := b.Question(dnsmessage.Question{Name: fqdn, Type: qtype, Class: dnsmessage.ClassINET}); err != nil {
		return false, err
	}
	query, err := b.Finish()
	if err != nil {
		return false, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "udp", server)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(query); err != nil {
		return false, err
	}
	buf := make([]byte, 1500)
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return false, err
		}
		var p dnsmessage.Parser
		h, err := p.Start(buf[:n])
		if err != nil || h.ID != id || !h.Response {
			continue // not the answer to this query
		}
		switch h.RCode {
		case dnsmessage.RCodeNameError:
			return false, nil
		case dnsmessage.RCodeSuccess:
			return true, nil
		case dnsmessage.RCodeRefused, dnsmessage.RCodeNotImplemented, dnsmessage.RCodeFormatError:
			return false, fmt.Errorf("%w: %s", errUnanswerable, h.RCode)
		default: // SERVFAIL: CoreDNS before it has synced with the API server, say
			return false, fmt.Errorf("%w: %s", errUnanswered, h.RCode)
		}
	}
}
