package etcdcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

// serviceFieldOwner is the field manager of Steward's server-side applies of the client Service: the fields it
// applied are its own, so a key dropped from spec.service is dropped from the Service, and fields others set (a
// cloud controller's annotations, the allocated cluster IP and node port) stay theirs.
const serviceFieldOwner = "steward"

// ensureClientService keeps the client Service as spec.service shapes it: created when missing, applied again
// when the template changed or a field it sets was changed by hand. A change the API server refuses (a node
// port taken or outside the cluster's range, a load balancer class it does not allow) is no pass error: the
// members are served as before, and obs records the refusal for Degraded. Records the Service's external
// access in obs for status.
func (r *Reconciler) ensureClientService(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	want := resources.ClientService(cluster)
	have := &corev1.Service{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return fmt.Errorf("get client Service: %w", err)
	}
	why := "missing"
	if have != nil {
		why = resources.ClientServiceStale(have, want)
	}
	current := have
	if why != "" {
		applied, err := r.applyService(ctx, want)
		switch {
		case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsConflict(err):
			obs.serviceRefused = fmt.Sprintf("the API server refuses the client Service as spec.service shapes it (%v); clients reach the "+
				"members through the Service as it was. Correct spec.service", err)
		case err != nil:
			return fmt.Errorf("apply client Service: %w", err)
		case have == nil:
			current = applied
			ctrl.LoggerFrom(ctx).Info("Created object", "EtcdCluster", klog.KObj(cluster), "kind", "Service", "name", want.Name)
		default:
			current = applied
			ctrl.LoggerFrom(ctx).Info("Updated the client Service", "EtcdCluster", klog.KObj(cluster), "service", want.Name, "why", why, "type", want.Spec.Type)
			r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "ClientServiceUpdated", "Service %s is now of type %s as spec.service asks (%s)", want.Name, want.Spec.Type, why)
		}
	}
	obs.serviceObserved, obs.externalAccess = true, resources.ExternalAccessOf(cluster, current)
	return nil
}

// applyService server-side applies svc (only the fields ClientService sets) and returns the Service as the API
// server now has it.
func (r *Reconciler) applyService(ctx context.Context, svc *corev1.Service) (*corev1.Service, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(svc)
	if err != nil {
		return nil, fmt.Errorf("convert Service: %w", err)
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(serviceFieldOwner), client.ForceOwnership); err != nil {
		return nil, err
	}
	applied := &corev1.Service{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, applied); err != nil {
		return nil, fmt.Errorf("convert applied Service: %w", err)
	}
	return applied, nil
}
