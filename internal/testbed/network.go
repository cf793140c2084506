package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// iptablesComment tags every rule the test bed adds itself, so cleanup removes exactly those.
const iptablesComment = "steward-testbed"

// guardRules keep pod traffic on the pod bridge: pods may reach each other, Services and the node, but nothing
// is forwarded from the pod network to the machine's real interfaces. The ACCEPT rules come first so pods on
// the bridge (with bridge-nf-call-iptables on, their traffic passes FORWARD too) keep talking to each other.
var guardRules = [][]string{
	{"FORWARD", "-s", PodCIDR, "-o", podBridge, "-j", "ACCEPT"},
	{"FORWARD", "-d", PodCIDR, "-o", podBridge, "-j", "ACCEPT"},
	{"FORWARD", "-s", PodCIDR, "-j", "DROP"},
}

// setupNetwork creates the node's address and the pod bridge and switches on the kernel settings kube-proxy's
// iptables mode needs (routing between pods and Services, and bridged traffic passing through iptables).
func setupNetwork() error {
	steps := [][]string{
		{"ip", "link", "add", hostBridge, "type", "bridge"},
		{"ip", "addr", "add", NodeIP + "/32", "dev", hostBridge},
		{"ip", "link", "set", hostBridge, "up"},
		// The CNI bridge plugin would create the pod bridge too; creating it here makes the node IP's route and
		// the guard rules valid before the first pod.
		{"ip", "link", "add", podBridge, "type", "bridge"},
		{"ip", "addr", "add", podGatewayIP + "/24", "dev", podBridge},
		{"ip", "link", "set", podBridge, "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("network setup `%s`: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	for key, val := range map[string]string{
		"net/ipv4/ip_forward":                 "1",
		"net/bridge/bridge-nf-call-iptables":  "1",
		"net/bridge/bridge-nf-call-ip6tables": "1",
	} {
		if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644); err != nil {
			return fmt.Errorf("set sysctl %s=%s (kube-proxy needs it; is br_netfilter available?): %w", strings.ReplaceAll(key, "/", "."), val, err)
		}
	}
	for i := len(guardRules) - 1; i >= 0; i-- {
		args := append([]string{"-w", "-I"}, guardRules[i]...)
		args = append(args, "-m", "comment", "--comment", iptablesComment)
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// teardownNetwork removes what setupNetwork and the pods added. It is best effort and idempotent: it runs at
// every Stop and before every Start.
func teardownNetwork(kubeProxy string) {
	if kubeProxy != "" {
		// Removes the KUBE-* chains and rules kube-proxy programmed.
		_ = exec.Command(kubeProxy, "--cleanup", "--proxy-mode=iptables").Run()
	}
	for _, r := range guardRules {
		args := append([]string{"-w", "-D"}, r...)
		args = append(args, "-m", "comment", "--comment", iptablesComment)
		for exec.Command("iptables", args...).Run() == nil {
		}
	}
	removeCNIRules()
	removePodNetns()
	for _, link := range []string{podBridge, hostBridge} {
		_ = exec.Command("ip", "link", "del", link).Run()
	}
	// Veths of pods whose sandboxes were killed rather than torn down by CNI.
	out, _ := exec.Command("ip", "-o", "link", "show", "master", podBridge).Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			_ = exec.Command("ip", "link", "del", strings.Split(strings.TrimSuffix(f[1], ":"), "@")[0]).Run()
		}
	}
}

// removeCNIRules deletes the chains the CNI portmap plugin leaves behind when a sandbox is killed without a
// CNI DEL, and the kubelet's own KUBE- chains (kube-proxy --cleanup removed its chains before). Only chains with
// those prefixes and rules that name the test bed's pod range are touched.
func removeCNIRules() {
	for _, family := range []string{"iptables", "ip6tables"} {
		removeChains(family)
	}
}

func removeChains(iptables string) {
	for _, table := range []string{"nat", "filter", "mangle"} {
		out, err := exec.Command(iptables+"-save", "-t", table).Output()
		if err != nil {
			continue
		}
		var chains []string
		for _, line := range strings.Split(string(out), "\n") {
			switch {
			case strings.HasPrefix(line, ":CNI-") || strings.HasPrefix(line, ":KUBE-"):
				chains = append(chains, strings.Fields(strings.TrimPrefix(line, ":"))[0])
			case strings.HasPrefix(line, "-A ") && (strings.Contains(line, "CNI-") || strings.Contains(line, "KUBE-") || strings.Contains(line, "10.244.0.")):
				args := append([]string{"-w", "-t", table, "-D"}, splitRule(strings.TrimPrefix(line, "-A "))...)
				_ = exec.Command(iptables, args...).Run()
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, chain := range chains {
				_ = exec.Command(iptables, "-w", "-t", table, op, chain).Run()
			}
		}
	}
}

// splitRule splits an iptables-save rule into arguments, keeping quoted comments whole.
func splitRule(rule string) []string {
	var args []string
	var cur strings.Builder
	quoted := false
	for _, r := range rule {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}

// removePodNetns deletes network namespaces containerd created for pod sandboxes whose pod had an address in
// the test bed's pod range.
func removePodNetns() {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		out, _ := exec.Command("ip", "netns", "exec", e.Name(), "ip", "-o", "-4", "addr").Output()
		if len(out) == 0 || strings.Contains(string(out), "10.244.0.") {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}
