package manager

import (
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
)

// Event spam filter: client-go's default lets 25 Events per object through and then one every five minutes, so
// a long operation (an upgrade of five members through two minors records some forty) loses its last Events, the
// ones that say how it ended. Steward records one Event per step it takes, and steps are paced by reconciles.
const (
	eventBurst = 200
	// eventRefillPerSecond: one more Event per object every ten seconds once the burst is spent.
	eventRefillPerSecond = 0.1
)

// NewEventRecorder returns the recorder Steward's controllers record Events with, as component "steward": client-go's
// broadcaster with a spam filter sized for an operator whose Events each stand for a step, writing to the API and
// logging each Event at V(1) as controller-runtime's recorder does. The manager's own recorder (leader election)
// keeps client-go's defaults. stop flushes and stops it.
func NewEventRecorder(cfg *rest.Config, scheme *runtime.Scheme, log logr.Logger) (recorder record.EventRecorder, stop func(), err error) {
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("event client: %w", err)
	}
	broadcaster := record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{BurstSize: eventBurst, QPS: eventRefillPerSecond})
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: clientset.CoreV1().Events("")})
	broadcaster.StartEventWatcher(func(e *corev1.Event) {
		log.V(1).Info(e.Message, "type", e.Type, "object", e.InvolvedObject, "reason", e.Reason)
	})
	return broadcaster.NewRecorder(scheme, corev1.EventSource{Component: "steward"}), broadcaster.Shutdown, nil
}
