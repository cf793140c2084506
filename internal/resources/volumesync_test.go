package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"steward.dev/steward/internal/plan"
)

// TestVolumeResizeRefresh: a member Pod is annotated with its volume's capacity while the claim's file system
// resize is pending, once per capacity, and never while it goes or has ended.
func TestVolumeResizeRefresh(t *testing.T) {
	const gi2 = 2 << 30
	pending := plan.Volume{Request: gi2, Capacity: gi2, Resize: "FileSystemResizePending"}
	pod := func(annotation string, phase corev1.PodPhase, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "c-a"}, Status: corev1.PodStatus{Phase: phase}}
		if annotation != "" {
			p.Annotations = map[string]string{AnnotationVolumeCapacity: annotation}
		}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	tests := map[string]struct {
		pod       *corev1.Pod
		volume    plan.Volume
		wantValue string
		want      bool
	}{
		"pending, not annotated":                 {pod("", corev1.PodRunning, false), pending, "2147483648", true},
		"pending, a Pod about to run":            {pod("", corev1.PodPending, false), pending, "2147483648", true},
		"pending, annotated for an earlier size": {pod("1073741824", corev1.PodRunning, false), pending, "2147483648", true},
		"pending, already annotated":             {pod("2147483648", corev1.PodRunning, false), pending, "", false},
		"no resize under way":                    {pod("", corev1.PodRunning, false), plan.Volume{Request: gi2, Capacity: gi2}, "", false},
		"the volume itself still growing":        {pod("", corev1.PodRunning, false), plan.Volume{Request: gi2, Capacity: gi2 / 2, Resize: "Resizing"}, "", false},
		"a failed resize":                        {pod("", corev1.PodRunning, false), plan.Volume{Request: gi2, Capacity: gi2 / 2, Resize: "NodeResizeError"}, "", false},
		"pending, capacity unknown":              {pod("", corev1.PodRunning, false), plan.Volume{Request: gi2, Resize: "FileSystemResizePending"}, "", false},
		"pending, the Pod being deleted":         {pod("", corev1.PodRunning, true), pending, "", false},
		"pending, the Pod failed":                {pod("", corev1.PodFailed, false), pending, "", false},
		"pending, no Pod":                        {nil, pending, "", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			value, ok := VolumeResizeRefresh(tt.pod, tt.volume)
			if value != tt.wantValue || ok != tt.want {
				t.Errorf("VolumeResizeRefresh = %q, %t; want %q, %t", value, ok, tt.wantValue, tt.want)
			}
		})
	}
}
