package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// iptablesComment tags every rule the test bed adds itself, so cleanup removes exactly those.
const iptablesComment = "steward-testbed"

// podNetwork is the range every node's pod range lies in.
const podNetwork = "10.244.0.0/16"

// guardRules keep pod traffic on the pod bridges: pods may reach each other (on their node's bridge and, routed
// by this machine, on other nodes' bridges), Services and the nodes, but nothing is forwarded from the pod
// network to the machine's real interfaces. The ACCEPT rules come first so pods on a bridge (with
// bridge-nf-call-iptables on, their traffic passes FORWARD too) keep talking to each other.
var guardRules = [][]string{
	{"FORWARD", "-s", podNetwork, "-o", "stw+", "-j", "ACCEPT"},
	{"FORWARD", "-d", podNetwork, "-o", "stw+", "-j", "ACCEPT"},
	{"FORWARD", "-s", podNetwork, "-j", "DROP"},
}

// apiAliasRule sends what node n's kubelet sends to its own API address (Node.apiAddress) to the API server.
func apiAliasRule(n Node) []string {
	return []string{"OUTPUT", "-d", n.apiAddress(), "-p", "tcp", "--dport", strconv.Itoa(apiserverPort),
		"-j", "DNAT", "--to-destination", fmt.Sprintf("%s:%d", NodeIP, apiserverPort)}
}

// setupNetwork creates the nodes' addresses and pod bridges and switches on the kernel settings kube-proxy's
// iptables mode needs (routing between pods and Services, and bridged traffic passing through iptables). Pods on
// different nodes reach each other through this machine, which holds every node's bridge: each bridge's
// address gives this machine a route to that node's pod range.
func setupNetwork(nodes []Node) error {
	steps := [][]string{{"ip", "link", "add", hostBridge, "type", "bridge"}}
	for _, n := range nodes {
		steps = append(steps, []string{"ip", "addr", "add", n.IP + "/32", "dev", hostBridge},
			[]string{"ip", "addr", "add", n.apiAddress() + "/32", "dev", hostBridge})
	}
	steps = append(steps, []string{"ip", "link", "set", hostBridge, "up"})
	for _, n := range nodes {
		// The CNI bridge plugin would create the pod bridge too; creating it here makes the node IP's route and
		// the guard rules valid before the first pod.
		steps = append(steps, []string{"ip", "link", "add", n.bridge(), "type", "bridge"},
			[]string{"ip", "addr", "add", n.gateway() + "/24", "dev", n.bridge()},
			[]string{"ip", "link", "set", n.bridge(), "up"})
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
		if err := iptables("filter", "-I", guardRules[i]...); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if err := iptables("nat", "-I", apiAliasRule(n)...); err != nil {
			return err
		}
	}
	return nil
}

// iptables adds (op -I or -A) or deletes (-D) a rule of table, tagged with iptablesComment.
func iptables(table, op string, rule ...string) error {
	args := append([]string{"-w", "-t", table, op}, rule...)
	args = append(args, "-m", "comment", "--comment", iptablesComment)
	if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// deleteRule removes every copy of a rule iptables added to the filter table.
func deleteRule(rule []string) {
	for iptables("filter", "-D", rule...) == nil {
	}
}

// teardownNetwork removes what setupNetwork and the pods added. It is best effort and idempotent: it runs at
// every Stop and before every Start.
func teardownNetwork(kubeProxy string) {
	if kubeProxy != "" {
		// Removes the KUBE-* chains and rules kube-proxy programmed.
		_ = exec.Command(kubeProxy, "--cleanup", "--proxy-mode=iptables").Run()
	}
	// Also the test bed's own rules (guard, API alias, isolation): they carry iptablesComment.
	removeCNIRules()
	removePodNetns("10.244.", true)
	out, _ := exec.Command("ip", "-o", "link", "show").Output()
	var bridges []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "stw") {
			bridges = append(bridges, strings.Split(strings.TrimSuffix(f[1], ":"), "@")[0])
		}
	}
	for _, link := range bridges {
		removeBridgePorts(link)
		_ = exec.Command("ip", "link", "del", link).Run()
	}
}

// removeBridgePorts deletes the veths of pods whose sandboxes were killed rather than torn down by CNI.
func removeBridgePorts(bridge string) {
	out, _ := exec.Command("ip", "-o", "link", "show", "master", bridge).Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 1 {
			_ = exec.Command("ip", "link", "del", strings.Split(strings.TrimSuffix(f[1], ":"), "@")[0]).Run()
		}
	}
}

// removeCNIRules deletes the chains the CNI portmap plugin leaves behind when a sandbox is killed without a
// CNI DEL, the kubelet's own KUBE- chains (kube-proxy --cleanup removed its chains before) and the test bed's
// own rules. Only chains with those prefixes and rules that name the test bed's pod network or carry its
// comment are touched.
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
			case strings.HasPrefix(line, "-A ") && (strings.Contains(line, "CNI-") || strings.Contains(line, "KUBE-") || strings.Contains(line, "10.244.") ||
				strings.Contains(line, iptablesComment)):
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

// removePodNetns deletes network namespaces containerd created for pod sandboxes whose pod had an address that
// starts with prefix (a node's range, or the whole pod network), and with withoutAddress those that have none
// (a sandbox whose CNI setup never finished; only when the whole test bed goes).
func removePodNetns(prefix string, withoutAddress bool) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		out, _ := exec.Command("ip", "netns", "exec", e.Name(), "ip", "-o", "-4", "addr").Output()
		if (withoutAddress && len(out) == 0) || strings.Contains(string(out), " "+prefix) {
			_ = exec.Command("ip", "netns", "del", e.Name()).Run()
		}
	}
}
