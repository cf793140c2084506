package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"steward.dev/steward/internal/testbed"
)

// sameQuantity: a and b are the same quantity however written (the API server prints 2048Mi as 2Gi).
func sameQuantity(a, b string) bool {
	qa, errA := resource.ParseQuantity(a)
	qb, errB := resource.ParseQuantity(b)
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}

// benchStorage times storage changes of a 3-member cluster: its volumes grown in place (the test bed's default
// class allows expansion), and every member moved to the other storage class and back (each a replacement of all
// three members, one at a time). The physical bound of one member's replacement is an etcd process joining by
// hand (learner, start, promote), which a migration does three times.
func benchStorage(ctx context.Context, c *testbed.Cluster, runs int) (section, error) {
	run := kubectlOn(ctx, c)
	kubectl := func(args ...string) (string, error) { return run("", args...) }
	const name = "bench-storage"
	// settled: Available, not progressing, three members, and three PVCs all of class and (when given) capacity.
	settled := func(class, capacity string) error {
		return testbed.Eventually(ctx, 10*time.Minute, 100*time.Millisecond, func() error {
			out, err := kubectl("get", "etcdcluster", name, "-o",
				`jsonpath={.status.readyReplicas}/{.status.conditions[?(@.type=="Progressing")].status}/{.status.members[*].name}/{.metadata.generation}/{.status.observedGeneration}`)
			if err != nil {
				return err
			}
			parts := strings.Split(out, "/")
			if len(parts) != 5 || parts[0] != "3" || parts[1] != "False" || len(strings.Fields(parts[2])) != 3 || parts[3] != parts[4] {
				return fmt.Errorf("not settled: %s", out)
			}
			pvcs, err := kubectl("get", "pvc", "-l", "etcd.steward.dev/cluster="+name, "-o",
				`jsonpath={range .items[*]}{.spec.storageClassName}={.status.capacity.storage} {end}`)
			if err != nil {
				return err
			}
			if len(strings.Fields(pvcs)) != 3 {
				return fmt.Errorf("volumes: %s", pvcs)
			}
			for _, v := range strings.Fields(pvcs) {
				cls, size, _ := strings.Cut(v, "=")
				if cls != class || (capacity != "" && !sameQuantity(size, capacity)) {
					return fmt.Errorf("volumes: %s", pvcs)
				}
			}
			return nil
		})
	}
	manifest := fmt.Sprintf("apiVersion: etcd.steward.dev/v1alpha1\nkind: EtcdCluster\nmetadata: {name: %s, namespace: default}\n"+
		"spec: {replicas: 3, version: %q, storage: {size: 1Gi, storageClassName: %s}}\n", name, testbed.EtcdVersions[0], testbed.StorageClassName)
	apply := exec.CommandContext(ctx, c.KubectlPath(), "--kubeconfig", c.Kubeconfig, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(manifest)
	if out, err := apply.CombinedOutput(); err != nil {
		return section{}, fmt.Errorf("apply: %w: %s", err, out)
	}
	if err := settled(testbed.StorageClassName, "1Gi"); err != nil {
		return section{}, err
	}
	var grow, away, back, bound []time.Duration
	size := 1024
	for i := 0; i < runs; i++ {
		size += 512
		begin := time.Now()
		if _, err := kubectl("patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"storage":{"size":"%dMi"}}}`, size)); err != nil {
			return section{}, err
		}
		if err := settled(testbed.StorageClassName, fmt.Sprintf("%dMi", size)); err != nil {
			return section{}, err
		}
		grow = append(grow, time.Since(begin))
		for _, step := range []struct {
			class string
			into  *[]time.Duration
		}{{testbed.FixedStorageClassName, &away}, {testbed.StorageClassName, &back}} {
			begin := time.Now()
			if _, err := kubectl("patch", "etcdcluster", name, "--type=merge", "-p", fmt.Sprintf(`{"spec":{"storage":{"storageClassName":%q}}}`, step.class)); err != nil {
				return section{}, err
			}
			if err := settled(step.class, ""); err != nil {
				return section{}, err
			}
			*step.into = append(*step.into, time.Since(begin))
		}
		d, err := etcdProcessJoins(ctx, c)
		if err != nil {
			return section{}, err
		}
		bound = append(bound, d)
	}
	if _, err := kubectl("delete", "etcdcluster", name, "--wait=true"); err != nil {
		return section{}, err
	}
	return render("storage", map[string]any{"FixedClass": testbed.FixedStorageClassName, "Runs": runs, "Table": table([]row{{"3 volumes expanded in place (+512Mi)", grow},
		{"3 members migrated to another class", away}, {"3 members migrated back", back},
		{"etcd process joins by hand (learner, start, promote)", bound}})})
}
