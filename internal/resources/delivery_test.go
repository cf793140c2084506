package resources

import (
	"strings"
	"testing"
)

func TestAgentImageVolumeFor(t *testing.T) {
	for _, tt := range []struct {
		delivery, server string
		want             bool
		err              string
	}{
		{AgentDeliveryInitContainer, "v1.34.4", false, ""},
		{AgentDeliveryInitContainer, "", false, ""},
		{AgentDeliveryImageVolume, "v1.37.2", true, ""},
		{AgentDeliveryImageVolume, "v1.35.0", true, ""},
		{AgentDeliveryImageVolume, "v1.35.4-gke.1200", true, ""},
		{AgentDeliveryImageVolume, "v1.36.3+k3s1", true, ""},
		{AgentDeliveryImageVolume, "v2.0.0", true, ""},
		{AgentDeliveryImageVolume, "v1.34.4", false, "needs Kubernetes 1.35 or newer"},
		{AgentDeliveryImageVolume, "v1.29.15-eks-1234", false, "the API server is v1.29.15-eks-1234"},
		{AgentDeliveryImageVolume, "unknown", false, "read the API server's version"},
		{"", "v1.37.2", false, "not \"\""},
		{"imagevolume", "v1.37.2", false, "init-container or image-volume"},
	} {
		got, err := AgentImageVolumeFor(tt.delivery, tt.server)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("AgentImageVolumeFor(%q, %q) = %v, %v; want %v, error containing %q", tt.delivery, tt.server, got, err, tt.want, tt.err)
		}
	}
}
