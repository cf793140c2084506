package resources

import (
	"fmt"

	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// How steward-agent gets into member Pods (the operator's --agent-delivery).
const (
	// AgentDeliveryInitContainer copies the agent into the tools volume with an init container: every Kubernetes
	// release and runtime Steward supports.
	AgentDeliveryInitContainer = "init-container"
	// AgentDeliveryImageVolume mounts the agent image as an image volume (Options.AgentImageVolume): Kubernetes
	// 1.35 or newer, on nodes whose runtime mounts image volumes (containerd 2.1 or newer, CRI-O 1.31 or newer).
	AgentDeliveryImageVolume = "image-volume"
)

// imageVolumesSince is the first Kubernetes release with image volumes on by default (the ImageVolume feature
// gate: beta and off in 1.33 and 1.34, on from 1.35, GA from 1.36).
var imageVolumesSince = utilversion.MustParseGeneric("1.35")

// AgentImageVolumeFor is Options.AgentImageVolume for --agent-delivery delivery on an API server of serverVersion
// (its gitVersion, as discovery reports it). image-volume on a release before 1.35 is an error rather than a
// fallback: there the API server drops the volume or the kubelet refuses it, and every member Pod would fail to
// start. Whether the nodes' runtime mounts image volumes, the operator cannot see (a namespace-scoped install
// may not read Nodes), so the flag is the cluster admin's to set.
func AgentImageVolumeFor(delivery, serverVersion string) (bool, error) {
	switch delivery {
	case AgentDeliveryInitContainer:
		return false, nil
	case AgentDeliveryImageVolume:
		v, err := utilversion.ParseGeneric(serverVersion)
		if err != nil {
			return false, fmt.Errorf("--agent-delivery=%s: read the API server's version %q: %w", delivery, serverVersion, err)
		}
		if v.LessThan(imageVolumesSince) {
			return false, fmt.Errorf("--agent-delivery=%s needs Kubernetes %s or newer (image volumes), the API server is %s: use %s",
				delivery, imageVolumesSince, serverVersion, AgentDeliveryInitContainer)
		}
		return true, nil
	}
	return false, fmt.Errorf("--agent-delivery is %s or %s, not %q", AgentDeliveryInitContainer, AgentDeliveryImageVolume, delivery)
}
