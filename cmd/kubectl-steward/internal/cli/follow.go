package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/cmd/kubectl-steward/internal/report"
)

// oneShot is a kind of object that runs once and ends Complete or Failed (EtcdBackup, EtcdRestore): what
// createAndFollow needs to follow one.
type oneShot struct {
	kind       string // "EtcdBackup"
	newObj     func() client.Object
	list       client.ObjectList
	conditions func(client.Object) []metav1.Condition
	summary    func(client.Object) string
	// mayNotExistYet: Steward creates the object (the restore of a cluster bootstrapped from a backup), so
	// its absence is waited out instead of being an error.
	mayNotExistYet bool
}

// followOptions are the flags backup and restore share.
type followOptions struct {
	format  string
	wait    bool
	dryRun  bool
	timeout time.Duration
}

// followFlags adds --wait, --timeout, --dry-run and -o to a command that creates a what ("backup").
func followFlags(cmd *cobra.Command, f *followOptions, what string, timeout time.Duration) {
	cmd.Flags().BoolVar(&f.wait, "wait", true, "Wait until the "+what+" is Complete or Failed")
	cmd.Flags().DurationVar(&f.timeout, "timeout", timeout, "How long to wait; when it passes the exit code is 124 and the "+what+" carries on")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "Print the object that would be created (as YAML, or -o json) and create nothing")
	outputFlag(cmd, &f.format)
}

// createAndFollow is the end of backup and restore: print obj instead with --dry-run; else create it, and unless
// --wait=false follow the one-shot object key (obj itself, or the restore Steward creates for it) until it
// ends, printing progress. A Failed end is an error with its reason; --timeout passing is ErrTimeout.
func (o *Options) createAndFollow(ctx context.Context, c client.WithWatch, obj client.Object, key client.ObjectKey, s oneShot, f followOptions) error {
	if f.dryRun {
		format := f.format
		if format == outputTable {
			format = outputYAML
		}
		return printDocument(o.Streams.Out, format, obj)
	}
	kind := kindOf(obj)
	msg := o.messages(f.format)
	if err := c.Create(ctx, obj); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %s/%s already exists: choose another name", kind, obj.GetNamespace(), obj.GetName())
		}
		return fmt.Errorf("create %s %s/%s: %w", kind, obj.GetNamespace(), obj.GetName(), err)
	}
	fmt.Fprintf(msg, "%s.etcd.steward.dev/%s created\n", strings.ToLower(kind), obj.GetName())
	if !f.wait {
		if f.format != outputTable {
			return printDocument(o.Streams.Out, f.format, obj)
		}
		return nil
	}

	wctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	progress := progressPrinter{w: msg, start: o.Now(), now: o.Now}
	var p report.Progress
	var last client.Object
	announced := false
	err := waitFor(wctx, c, key, s.newObj, s.list, o.Resync, func(got client.Object) (bool, error) {
		switch {
		case got != nil:
			last = got
			progress.print(p.Observe(s.conditions(got))...)
			return etcdv1alpha1.Finished(s.conditions(got)), nil
		case last != nil || !s.mayNotExistYet:
			return false, fmt.Errorf("%s %s was deleted while waiting for it", s.kind, key)
		case !announced:
			progress.print(fmt.Sprintf("waiting for Steward to create %s/%s", strings.ToLower(s.kind), key.Name))
			announced = true
		}
		return false, nil
	})
	if errors.Is(err, ErrTimeout) {
		phase := "not created yet"
		if last != nil {
			phase = "phase " + report.Phase(s.conditions(last))
		}
		return fmt.Errorf("%w %s for %s %s (%s); it carries on: kubectl get %s %s -n %s",
			ErrTimeout, f.timeout, s.kind, key, phase, strings.ToLower(s.kind), key.Name, key.Namespace)
	}
	if err != nil {
		return err
	}
	if f.format != outputTable {
		if err := printDocument(o.Streams.Out, f.format, last); err != nil {
			return err
		}
	}
	if failure := report.Failure(s.conditions(last)); failure != "" {
		return fmt.Errorf("%s %s failed: %s", s.kind, key, failure)
	}
	fmt.Fprintln(msg, s.summary(last))
	return nil
}

// kindOf is the kind of one of Steward's objects, for messages.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *etcdv1alpha1.EtcdCluster:
		return "EtcdCluster"
	case *etcdv1alpha1.EtcdBackup:
		return "EtcdBackup"
	case *etcdv1alpha1.EtcdRestore:
		return "EtcdRestore"
	}
	return fmt.Sprintf("%T", obj)
}

var backupKind = oneShot{
	kind:       "EtcdBackup",
	newObj:     func() client.Object { return &etcdv1alpha1.EtcdBackup{} },
	list:       &etcdv1alpha1.EtcdBackupList{},
	conditions: func(o client.Object) []metav1.Condition { return o.(*etcdv1alpha1.EtcdBackup).Status.Conditions },
	summary:    func(o client.Object) string { return report.BackupSummary(o.(*etcdv1alpha1.EtcdBackup)) },
}

var restoreKind = oneShot{
	kind:       "EtcdRestore",
	newObj:     func() client.Object { return &etcdv1alpha1.EtcdRestore{} },
	list:       &etcdv1alpha1.EtcdRestoreList{},
	conditions: func(o client.Object) []metav1.Condition { return o.(*etcdv1alpha1.EtcdRestore).Status.Conditions },
	summary:    func(o client.Object) string { return report.RestoreSummary(o.(*etcdv1alpha1.EtcdRestore)) },
}
