package testbed

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// NodeAddress is a TCP address on the first node's address (NodeIP) that was free a moment ago: where a process
// the host runs can listen so that Pods reach it (an adoption's source, a kube-apiserver of a test's own).
func NodeAddress() (string, error) {
	port, err := freePort(NodeIP)
	if err != nil {
		return "", err
	}
	return net.JoinHostPort(NodeIP, strconv.Itoa(port)), nil
}

// ClusterDNSCommand is a command running bin with args on the host, in a mount namespace of its own whose
// /etc/resolv.conf names the cluster's DNS Service (written into dir), in a session of its own: a process outside
// Kubernetes that must resolve cluster names, as an adopted source's members must to reach Steward's members by
// their peer URLs; the host's own resolver does not know them.
func ClusterDNSCommand(dir, bin string, args ...string) (*exec.Cmd, error) {
	// Written once per dir: processes started before have it mounted, and a rewrite would empty it under them.
	resolv := filepath.Join(dir, "resolv.conf")
	if _, err := os.Stat(resolv); os.IsNotExist(err) {
		if err := os.WriteFile(resolv, []byte("nameserver "+DNSServiceIP+"\noptions ndots:1 timeout:1 attempts:2\n"), 0o644); err != nil {
			return nil, err
		}
	}
	script := "mount --bind " + resolv + " /etc/resolv.conf && exec " + bin + ` "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", script, filepath.Base(bin)}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd, nil
}
