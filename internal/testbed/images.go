package testbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"

	"steward.dev/steward/internal/ociimage"
	"steward.dev/steward/internal/version"
)

const imageRegistry = "steward.local"

// EtcdRepository is where the locally built etcd images are: the operator's default --etcd-image-repository,
// so an operator installed with default flags runs them. One name per image: the kubelet reports a container's
// image by any of its image's names, and the operator compares that name with its Pod's.
const EtcdRepository = "quay.io/coreos/etcd"

// EtcdImage is the image reference of the locally built etcd image at version (as in EtcdVersions, no "v").
// It contains /usr/local/bin/etcd, etcdctl and etcdutl, runs as UID 65532 and has no shell.
func EtcdImage(version string) string { return fmt.Sprintf("%s:v%s", EtcdRepository, version) }

// StewardImage is Steward's own image (internal/ociimage.Steward: the operator and steward-agent), built from
// the working tree at every start and imported under the release's reference, so the install manifests
// (config/default, charts/steward) run it unchanged.
const StewardImage = version.Image

// AgentImage is the image of backup, restore and verify Jobs: Steward's own, as in a real install.
const AgentImage = StewardImage

const (
	pauseImage   = imageRegistry + "/pause:v1"
	coreDNSImage = imageRegistry + "/coredns:" + CoreDNSVersion
	nonRootUser  = ociimage.NonRootUser
)

// writeImage writes a single-layer image unless out exists: out's name is keyed by what the image holds.
func writeImage(out, ref string, files []ociimage.File, entrypoint []string, user string) error {
	if _, err := os.Stat(out); err == nil {
		return nil
	}
	return ociimage.Write(out, []string{ref}, files, entrypoint, user)
}

// importImage loads an image tarball into the CRI namespace of the containerd at socket.
func (c *Cluster) importImage(ctx context.Context, socket, tarPath string) error {
	out, err := exec.CommandContext(ctx, c.containerdBinary("ctr"), "--address", socket, "--namespace", "k8s.io",
		"images", "import", "--platform", "linux/amd64", tarPath).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import image %s into containerd at %s: %w: %s", tarPath, socket, err, out)
	}
	return nil
}

// ImportImage loads an image tarball (docker-archive, as internal/ociimage writes) into every node's
// containerd, where Pods that name one of its references with pull policy IfNotPresent find it.
func (c *Cluster) ImportImage(ctx context.Context, tarPath string) error {
	for _, n := range c.nodes {
		if err := c.importImage(ctx, c.containerdSocket(n), tarPath); err != nil {
			return err
		}
	}
	return nil
}
