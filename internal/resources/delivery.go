package resources

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	utilversion "k8s.io/apimachinery/pkg/util/version"
)

// How steward-agent gets into member Pods (the operator's --agent-delivery).
const (
	// AgentDeliveryAuto, the default, mounts the agent image as an image volume where the API server and every
	// node can (ImageVolumesOnNodes, decided for each member Pod when it is created), and copies it with an init
	// container elsewhere.
	AgentDeliveryAuto = "auto"
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

// AgentDelivery is --agent-delivery resolved against the API server: AgentImageVolume fixes the choice for every
// member Pod, unless Auto leaves it to each Pod's creation (ImageVolumesOnNodes).
type AgentDelivery struct {
	AgentImageVolume bool
	Auto             bool
	// Why says what decided, for the operator's log.
	Why string
}

// ResolveAgentDelivery resolves --agent-delivery delivery on an API server of serverVersion (its gitVersion, as
// discovery reports it). image-volume on a release before 1.35 is an error rather than a fallback: there the API
// server drops the volume or the kubelet refuses it, and every member Pod would fail to start. auto there is the
// init container.
func ResolveAgentDelivery(delivery, serverVersion string) (AgentDelivery, error) {
	switch delivery {
	case AgentDeliveryInitContainer:
		return AgentDelivery{Why: "--agent-delivery=" + delivery}, nil
	case AgentDeliveryImageVolume, AgentDeliveryAuto:
		v, err := utilversion.ParseGeneric(serverVersion)
		if err != nil {
			return AgentDelivery{}, fmt.Errorf("--agent-delivery=%s: read the API server's version %q: %w", delivery, serverVersion, err)
		}
		tooOld := v.LessThan(imageVolumesSince)
		switch {
		case tooOld && delivery == AgentDeliveryAuto:
			return AgentDelivery{Why: fmt.Sprintf("init containers: the API server is %s, image volumes need Kubernetes %s or newer",
				serverVersion, imageVolumesSince)}, nil
		case tooOld:
			return AgentDelivery{}, fmt.Errorf("--agent-delivery=%s needs Kubernetes %s or newer (image volumes), the API server is %s: use %s",
				delivery, imageVolumesSince, serverVersion, AgentDeliveryInitContainer)
		case delivery == AgentDeliveryAuto:
			return AgentDelivery{Auto: true, Why: fmt.Sprintf("the API server is %s: image volumes where every node's runtime mounts them", serverVersion)}, nil
		}
		return AgentDelivery{AgentImageVolume: true, Why: "--agent-delivery=" + delivery}, nil
	}
	return AgentDelivery{}, fmt.Errorf("--agent-delivery is %s, %s or %s, not %q", AgentDeliveryAuto, AgentDeliveryInitContainer, AgentDeliveryImageVolume, delivery)
}

// imageVolumeRuntimes are the first releases of each container runtime that mount image volumes, by the name
// a node reports in status.nodeInfo.containerRuntimeVersion ("containerd://2.4.2").
var imageVolumeRuntimes = map[string]*utilversion.Version{
	"containerd": utilversion.MustParseGeneric("2.1"),
	"cri-o":      utilversion.MustParseGeneric("1.31"),
}

// RuntimeMountsImageVolumes reports whether a node's container runtime, as the node reports it, mounts image
// volumes. An unknown runtime or version does not; what follows the version's numbers ("1.6.20~ds1",
// "v2.1.0-rc.1") is ignored.
func RuntimeMountsImageVolumes(runtimeVersion string) bool {
	name, ver, ok := strings.Cut(runtimeVersion, "://")
	since, known := imageVolumeRuntimes[name]
	if !ok || !known {
		return false
	}
	v, err := utilversion.ParseGeneric(ver)
	return err == nil && v.AtLeast(since)
}

// ImageVolumesOnNodes decides auto delivery for a member Pod about to be created: image volumes only when there
// are nodes and every one's runtime mounts them, since the Pod may land on any (a Pod that cannot mount its
// volume never starts). why names the node that decided otherwise.
func ImageVolumesOnNodes(nodes []corev1.Node) (ok bool, why string) {
	if len(nodes) == 0 {
		return false, "no Node to read a container runtime from"
	}
	for i := range nodes {
		if rt := nodes[i].Status.NodeInfo.ContainerRuntimeVersion; !RuntimeMountsImageVolumes(rt) {
			return false, fmt.Sprintf("node %s runs %q; image volumes need containerd 2.1 or CRI-O 1.31 or newer", nodes[i].Name, rt)
		}
	}
	return true, fmt.Sprintf("every node (%d) runs a runtime that mounts image volumes", len(nodes))
}
