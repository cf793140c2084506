// Package testbed runs a real single-node Kubernetes cluster on this machine for Steward's playground,
// integration and end-to-end tests: kube-apiserver (with its own etcd), kube-controller-manager, kube-scheduler,
// kube-proxy and kubelet on containerd + runc + CNI bridge networking, CoreDNS for cluster DNS, and a local-path
// provisioner behind a default StorageClass.
//
// Nothing comes from a container registry or a release download: the Kubernetes, etcd and CoreDNS binaries are
// built from pinned Go modules (the nested modules under third_party) and cached per machine, and the images the
// cluster runs (etcd at every version tests need, pause, CoreDNS) are assembled locally and imported into
// containerd. Every process the test bed starts is recorded by PID in its state directory, so Stop (or `Down`
// from another process) can stop all of it and remove what it changed on the host: network links, iptables
// rules, mounts and pod cgroups.
//
// The package owns the host while a cluster runs: there is one test bed per machine, and Start takes over (stops)
// any test bed left behind by an earlier process. It needs root, Linux, a Go toolchain and the Debian packages
// listed in Prerequisites.
package testbed
