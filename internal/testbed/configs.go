package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func (c *Cluster) state(elem ...string) string {
	return filepath.Join(append([]string{c.opts.StateDir}, elem...)...)
}

// writeFile writes content with ${NAME} placeholders filled from vars.
func writeFile(path, content string, vars map[string]string) error {
	for k, v := range vars {
		content = strings.ReplaceAll(content, "${"+k+"}", v)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o600)
}

// vars are the placeholders of node n's configuration files.
func (c *Cluster) vars(n Node) map[string]string {
	podLogs := "/var/log/pods" // the kubelet's default
	if n.index > 0 {
		// Every kubelet removes the log directories of pods it does not run.
		podLogs = c.state("pod-logs" + n.suffix())
	}
	return map[string]string{
		"STATE": c.opts.StateDir, "RUN": c.opts.RunDir, "SOCKET": c.containerdSocket(n), "PKI": c.state("pki"),
		"NODE_IP": n.IP, "NODE_NAME": n.Name, "POD_CIDR": n.PodCIDR, "POD_GATEWAY": n.gateway(),
		"POD_BRIDGE": n.bridge(), "DNS_IP": DNSServiceIP, "DOMAIN": ClusterDomain, "PAUSE": pauseImage,
		"CONTAINERD_ROOT": c.state("containerd" + n.suffix()), "CONTAINERD_STATE": c.containerdState(n),
		"CNI_CONF": c.cniConfDir(n), "CNI_IPAM": c.state("cni"+n.suffix(), "ipam"), "RUNC_ROOT": c.runcRoot(n),
		"CGROUP_ROOT": n.cgroupRoot(), "POD_LOGS": podLogs, "KUBELET": c.kubeletName(n), "POD_NETWORK": podNetwork,
	}
}

// containerdConfig is the configuration of the containerd the nodes run, in its format.
func (c *Cluster) containerdConfig() string {
	if c.ctrdBin != "" {
		return containerd2Config
	}
	return containerd1Config
}

// restrict_oom_score_adj: this machine's root lacks CAP_SYS_RESOURCE, so runc could not give Guaranteed pods
// the negative OOM score the kubelet asks for; containerd clamps it to its own score instead.
const containerd1Config = `version = 2
root = "${CONTAINERD_ROOT}"
state = "${CONTAINERD_STATE}"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "${SOCKET}"

[ttrpc]
  address = "${SOCKET}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "${CONTAINERD_ROOT}-opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "${PAUSE}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${RUNC_ROOT}"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "${CNI_CONF}"
`

// containerd2Config says what containerd1Config says in containerd 2's format (version 3): the CRI plugin is
// split into images and runtime, the sandbox image is a pinned image, and the CNI directories a list. The
// snapshotters containerd1Config disables are not built in (containerdSet).
const containerd2Config = `version = 3
root = "${CONTAINERD_ROOT}"
state = "${CONTAINERD_STATE}"
oom_score = 0

[grpc]
  address = "${SOCKET}"

[ttrpc]
  address = "${SOCKET}.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "${CONTAINERD_ROOT}-opt"

# NRI is not used here, and every node's containerd would bind the one default socket (/var/run/nri/nri.sock):
# started together, all but one failed with "address already in use".
[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "${PAUSE}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${RUNC_ROOT}"
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "${CNI_CONF}"
`

const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "steward-testbed",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "${POD_BRIDGE}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "${POD_CIDR}", "gateway": "${POD_GATEWAY}"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "${CNI_IPAM}"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// Image garbage collection is off (100%): the images cannot be pulled again once deleted. Eviction thresholds
// are low because the test bed shares the machine's disk and memory with the build and the tests.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: ${NODE_IP}
readOnlyPort: 0
healthzBindAddress: ${NODE_IP}
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: ${PKI}/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: ${PKI}/${KUBELET}-serving.crt
tlsPrivateKeyFile: ${PKI}/${KUBELET}-serving.key
cgroupDriver: cgroupfs
cgroupRoot: ${CGROUP_ROOT}
podLogsDir: ${POD_LOGS}
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://${SOCKET}
clusterDNS: [${DNS_IP}]
clusterDomain: ${DOMAIN}
resolvConf: ${STATE}/resolv.conf
podCIDR: ${POD_CIDR}
oomScoreAdj: 0
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
rotateCertificates: false
`

// conntrack sizes and timeouts are left to the kernel (zero values): kube-proxy would otherwise write sysctls
// this VM does not let it change.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ${STATE}/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: ${POD_NETWORK}
hostnameOverride: ${NODE_NAME}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
oomScoreAdj: 0
nodePortAddresses: ["${NODE_IP}/32"]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

func kubeconfig(server, ca, cert, key string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: steward-testbed
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: user
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: steward-testbed
  context: {cluster: steward-testbed, user: user}
current-context: steward-testbed
`, server, ca, cert, key)
}
