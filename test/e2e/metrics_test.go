package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/chaos"
	"steward.dev/steward/test/e2e/framework"
)

// TestMetricsAndAlerts installs Steward in its namespace with the Helm chart (metrics on, and the monitoring
// objects asked for on a cluster without their CRDs: the release installs without them), and follows a cluster
// through the test bed's Prometheus, which scrapes the operator's Pod and the members' Pods and evaluates the
// rules Steward ships: a backup sets the last-backup gauges, a member cut off the network makes EtcdMembersDown
// pending and it resolves once Steward has replaced the member, a schedule that keeps more backups than its claim
// holds raises StewardBackupClaimFillingUp before a backup fails for lack of space, every dashboard query returns
// data, a Role removed
// from a watched namespace raises StewardAPIAccessDenied, and the member gauges follow a scale-down 3 -> 1. Under client load throughout. The operator's metrics are refused to a scrape without a token (401), with
// the token of a ServiceAccount without the release's metrics-reader ClusterRole (403) and in plain HTTP.
func TestMetricsAndAlerts(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewScrapedNamespace(t, "metrics")
	// refusedNS: a second watched namespace, whose Role the last check removes (the Lease stays in ns, with its rights).
	refusedNS := framework.NewScrapedNamespace(t, "metrics-cut")
	out := framework.MustHelm(t, "install", "steward", "charts/steward", "--namespace", ns, "--set", "watchNamespaces={"+ns+","+refusedNS+"}",
		"--set", "replicaCount=1", "--set", "monitoring.podMonitor.enabled=true", "--set", "monitoring.serviceMonitor.enabled=true",
		"--set", "monitoring.prometheusRule.enabled=true", "--set", "monitoring.grafanaDashboard.enabled=true", "--wait", "--timeout", "3m")
	if !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install printed no deployed status:\n%s", out)
	}
	var dashboards corev1.ConfigMapList
	if err := framework.K8s.List(ctx, &dashboards, client.InNamespace(ns), client.MatchingLabels{"grafana_dashboard": "1"}); err != nil || len(dashboards.Items) != 1 {
		t.Errorf("dashboard ConfigMaps in %s: %d (%v), want 1", ns, len(dashboards.Items), err)
	}
	framework.WaitProm(t, "the operator scraped", 2*time.Minute, fmt.Sprintf(`up{job="steward",namespace=%q}`, ns), framework.PromValue(1))
	requireMetricsRefused(t, ns, "steward-"+ns+"-metrics-reader")

	// filler: a quiet cluster whose schedule fills its backup claim, created now to settle beside the other.
	filler := framework.NewCluster(ns, "filler", 1)
	if err := framework.K8s.Create(ctx, filler); err != nil {
		t.Fatal(err)
	}
	c := framework.NewCluster(ns, "watched", 3)
	c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 30 * time.Second}
	key, got := framework.Settle(t, c)
	load := framework.StartLoad(t, got)
	s := framework.PromSelector(ns, c.Name)
	for _, q := range []string{"steward_cluster_voters", "steward_cluster_desired_members", "steward_cluster_ready_members", "steward_cluster_healthy_voters"} {
		framework.WaitProm(t, q, 2*time.Minute, q+s, framework.PromValue(3))
	}
	framework.WaitProm(t, "quorum", time.Minute, "steward_cluster_has_quorum"+s, framework.PromValue(1))
	framework.WaitProm(t, "the leader", time.Minute, "steward_cluster_leader_info"+framework.PromSelector(ns, c.Name, fmt.Sprintf("member=%q", got.Status.Leader)), framework.PromValue(1))
	framework.WaitProm(t, "every member scraped", 2*time.Minute, "sum(up"+framework.PromSelector(ns, c.Name, `job="steward-etcd"`)+")", framework.PromValue(3))
	framework.WaitProm(t, "every member's db size", time.Minute, "steward_member_db_size_bytes"+s+" > 0", framework.PromSeries(3))

	// A backup sets the last-backup gauges to the backup's own record. It comes first: meanwhile the bootstrap's
	// failed peer sends (members start one after another) leave EtcdMembersDown's two-minute window.
	framework.CreateBackupClaim(t, ns, "256Mi")
	b := framework.NewBackup(ns, "metered", c.Name, etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: "metered.db"}})
	if err := framework.K8s.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	b = framework.WaitBackupFinished(t, client.ObjectKeyFromObject(b), 3*time.Minute)
	framework.RequireComplete(t, b, got)
	framework.WaitProm(t, "last backup time", 2*time.Minute, "steward_backup_last_success_timestamp_seconds"+s, framework.PromValue(float64(b.Status.CompletionTime.Unix())))
	framework.WaitProm(t, "last backup size", time.Minute, "steward_backup_last_size_bytes"+s, framework.PromValue(float64(b.Status.SizeBytes)))
	framework.WaitProm(t, "backup outcome counted", time.Minute, fmt.Sprintf(`sum(steward_backups_total%s)`, framework.PromSelector(ns, c.Name, `result="complete"`)), framework.PromValue(1))

	// Meanwhile a schedule fills a claim that holds fewer backups than it keeps.
	filling := startFillingClaim(t, filler)

	// A member cut off: etcd's members-down alert goes pending (its for: is 10 minutes; promtool tests cover the
	// firing), Steward replaces the member after 30 s (a learner added and promoted, counted), and the alert
	// clears. It must be clear before the cut for the cut to be what raises it.
	alert := fmt.Sprintf(`ALERTS{alertname="EtcdMembersDown",namespace=%q,cluster=%q}`, ns, c.Name)
	framework.WaitProm(t, "EtcdMembersDown clear after the bootstrap", 5*time.Minute, alert, framework.PromSeries(0))
	victim, victimID := framework.AFollower(t, got)
	var pod corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, &pod); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	if _, err := chaos.CutOffNetwork(&pod); err != nil {
		t.Fatal(err)
	}
	framework.WaitProm(t, "EtcdMembersDown raised", 3*time.Minute, alert, framework.PromSeries(1))
	t.Logf("EtcdMembersDown raised %s after the member was cut off", time.Since(cut).Round(time.Second))
	framework.WaitProm(t, "healthy voters down by one", time.Minute, "steward_cluster_healthy_voters"+s, framework.PromValue(2))
	framework.WaitMemberGone(t, key, victim, victimID, 4*time.Minute)
	framework.WaitSettled(t, key, 4*time.Minute)
	healed := time.Now()
	framework.WaitProm(t, "the replacement counted", time.Minute, fmt.Sprintf(`sum(steward_cluster_members_replaced_total%s) >= 1`, s), framework.PromSeries(1))
	for _, kind := range []string{"add_learner", "promote_learner"} {
		framework.WaitProm(t, kind+" steps counted", time.Minute, fmt.Sprintf(`sum(steward_cluster_steps_total%s) >= 1`, framework.PromSelector(ns, c.Name, fmt.Sprintf("kind=%q", kind))), framework.PromSeries(1))
	}

	// While the peers' failed sends during the replacement leave the alert's 2-minute rate: the full claim, the
	// dashboard, and what a Steward that lost rights in one namespace reports. Pending that long, the alert never
	// fires (its for: is 10 minutes).
	requireClaimAlertBeforeFull(t, filling)
	requireDashboardData(t, ns, c.Name)
	requireAccessDeniedAlert(t, ns, refusedNS)
	framework.WaitProm(t, "EtcdMembersDown resolved", 6*time.Minute, alert, framework.PromSeries(0))
	t.Logf("EtcdMembersDown resolved %s after Steward replaced the member", time.Since(healed).Round(time.Second))

	// Scale 3 -> 1: the gauges follow the spec, and the removals are counted.
	framework.PatchSpec(t, key, func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 1 })
	got = framework.WaitSettled(t, key, 4*time.Minute)
	for _, q := range []string{"steward_cluster_voters", "steward_cluster_desired_members", "steward_cluster_ready_members"} {
		framework.WaitProm(t, q+" after the scale-down", 2*time.Minute, q+s, framework.PromValue(1))
	}
	framework.WaitProm(t, "remove_member steps counted", time.Minute, fmt.Sprintf(`sum(steward_cluster_steps_total%s) >= 2`, framework.PromSelector(ns, c.Name, `kind="remove_member"`)), framework.PromSeries(1))

	framework.RequireNoLostWrites(t, load, "metrics scenario (member replaced, backup, scale-down)")
	framework.DeleteAndCheckNothingLeft(t, got)
	framework.WaitProm(t, "the deleted cluster's gauges gone", 2*time.Minute, "steward_cluster_voters"+s, framework.PromSeries(0))
}

// fillingClaimSize is the filling claim's size: two of the filler's backups (2.6 MB each) fit, the third does not.
const fillingClaimSize = 6 << 20

// startFillingClaim writes 1.5 MiB of values into the filler cluster, and has a schedule back it up every 30 seconds onto a
// claim of fillingClaimSize (the test bed's sized class, which fills up as a disk does), keeping ten: more than
// the claim holds.
func startFillingClaim(t *testing.T, filler *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.EtcdBackupSchedule {
	t.Helper()
	ctx := context.Background()
	settled := framework.WaitSettled(t, client.ObjectKeyFromObject(filler), 3*time.Minute)
	cli, _ := framework.MemberClient(t, settled)
	framework.WriteValues(t, cli, 6, 6)
	_ = cli.Close()
	framework.CreateSizedClaim(t, filler.Namespace, "filling", strconv.Itoa(fillingClaimSize))
	s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: filler.Namespace, Name: "keeps-too-much"},
		Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: filler.Name, Schedule: "@every 30s",
			Destination: etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "filling", Path: "filler"}},
			// Uncompressed, so that each backup takes the snapshot's size and three do not fit.
			Compression: etcdv1alpha1.CompressionNone,
			Retention:   etcdv1alpha1.Retention{MaxCount: ptr.To[int32](10)}}}
	if err := framework.K8s.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	return s
}

// requireClaimAlertBeforeFull waits for the schedule's first backup that did not fit, and checks that it failed
// as DestinationFull with the claim's space in its status, that Steward exports the claim's size, and that
// StewardBackupClaimFillingUp was raised (pending: its for: is 15 minutes, promtool tests cover the firing)
// before that backup failed. Then it deletes the schedule.
func requireClaimAlertBeforeFull(t *testing.T, s *etcdv1alpha1.EtcdBackupSchedule) {
	t.Helper()
	ctx := context.Background()
	var full *etcdv1alpha1.EtcdBackup
	var fitted []etcdv1alpha1.EtcdBackup
	framework.Poll(t, "a scheduled backup that does not fit the claim", 5*time.Minute, func() error {
		var list etcdv1alpha1.EtcdBackupList
		if err := framework.K8s.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{resources.LabelSchedule: s.Name}); err != nil {
			return err
		}
		fitted = nil
		for i := range list.Items {
			b := &list.Items[i]
			if meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete) {
				fitted = append(fitted, *b)
			}
			failed := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
			if failed == nil || failed.Status != metav1.ConditionTrue {
				continue
			}
			if failed.Reason != etcdv1alpha1.ReasonDestinationFull {
				t.Fatalf("backup %s failed as %s, want %s: %s", b.Name, failed.Reason, etcdv1alpha1.ReasonDestinationFull, failed.Message)
			}
			if full == nil || b.Status.CompletionTime.Before(full.Status.CompletionTime) {
				full = b.DeepCopy()
			}
		}
		if full == nil {
			return fmt.Errorf("%d of %d backups stored, none failed", len(fitted), len(list.Items))
		}
		return nil
	})
	if err := framework.K8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	sort.Slice(fitted, func(i, j int) bool { return fitted[i].Status.CompletionTime.Before(fitted[j].Status.CompletionTime) })
	var trail []string
	for _, b := range fitted {
		if sp := b.Status.ClaimSpace; sp != nil {
			trail = append(trail, fmt.Sprintf("%s: %d bytes stored, %d of %d free", b.Name, b.Status.SizeBytes, sp.AvailableBytes, sp.CapacityBytes))
		}
	}
	t.Logf("backups on the claim before the first that did not fit:\n%s", strings.Join(trail, "\n"))
	sp := full.Status.ClaimSpace
	if len(fitted) == 0 || sp == nil || sp.CapacityBytes != fillingClaimSize || sp.AvailableBytes >= fitted[len(fitted)-1].Status.SizeBytes {
		t.Fatalf("backup %s failed with the claim's space %+v after %d backups that fit: want the claim's %d bytes, and less free than a backup",
			full.Name, sp, len(fitted), fillingClaimSize)
	}
	framework.WaitProm(t, "the claim's size exported", time.Minute,
		fmt.Sprintf(`steward_backup_claim_capacity_bytes{namespace=%q,persistentvolumeclaim="filling"}`, s.Namespace), framework.PromValue(fillingClaimSize))
	// What the rules had found when the backup failed: the alert's state over the schedule's last minutes.
	raised := fmt.Sprintf(`max_over_time(ALERTS{alertname="StewardBackupClaimFillingUp",namespace=%q,persistentvolumeclaim="filling"}[3m])`, s.Namespace)
	got, err := framework.PromQueryAt(ctx, raised, full.Status.CompletionTime.Time)
	if err != nil || len(got) != 1 {
		t.Fatalf("StewardBackupClaimFillingUp before backup %s failed at %s: %v (%v), want it raised", full.Name,
			full.Status.CompletionTime.Format(time.RFC3339), got, err)
	}
}

// refusalsLogged returns the lines of the operator's log (namespace ns) that say a request was refused.
func refusalsLogged(t *testing.T, ns string) string {
	t.Helper()
	var lines []string
	for _, line := range strings.Split(framework.Kubectl(t, "", "-n", ns, "logs", "deployment/steward"), "\n") {
		if strings.Contains(line, "forbidden") || strings.Contains(line, "Unauthorized") {
			lines = append(lines, line)
		}
	}
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return strings.Join(lines, "\n")
}

// requireAccessDeniedAlert: a healthy Steward (operator namespace ns) has no request refused; once its Role in cut,
// one of the namespaces it watches, is removed and a cluster is created there, StewardAPIAccessDenied goes
// pending (its for: is 10 minutes; promtool tests cover the rest) while the operator's Pod stays Ready and does
// not restart: a Steward degraded while up.
func requireAccessDeniedAlert(t *testing.T, ns, cut string) {
	t.Helper()
	ctx := context.Background()
	refused := fmt.Sprintf(`sum by (code) (rate(rest_client_requests_total{job="steward",namespace=%q,code=~"401|403"}[5m])) > 0`, ns)
	if got, err := framework.PromQuery(ctx, refused); err != nil || len(got) > 0 {
		byMethod, _ := framework.PromQuery(ctx, fmt.Sprintf(`sum by (method, code) (increase(rest_client_requests_total{job="steward",namespace=%q,code=~"401|403"}[15m]))`, ns))
		t.Fatalf("requests of a healthy Steward refused: %v (%v); in the last 15 minutes, by method: %v; the operator's log:\n%s",
			got, err, byMethod, refusalsLogged(t, ns))
	}
	pods := framework.OperatorPodsIn(t, ns)
	if len(pods) != 1 {
		t.Fatalf("operator Pods in %s: %d, want 1", ns, len(pods))
	}
	before := pods[0]
	if err := framework.K8s.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: cut, Name: "steward-manager"}}); err != nil {
		t.Fatal(err)
	}
	if err := framework.K8s.Create(ctx, framework.NewCluster(cut, "refused", 1)); err != nil {
		t.Fatal(err)
	}
	framework.WaitProm(t, "StewardAPIAccessDenied pending", 3*time.Minute,
		fmt.Sprintf(`ALERTS{alertname="StewardAPIAccessDenied",namespace=%q,code="403"}`, ns), framework.PromSeries(1))
	var after corev1.Pod
	if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(&before), &after); err != nil {
		t.Fatalf("the operator's Pod %s after the cut: %v", before.Name, err)
	}
	if !framework.PodIsReady(&after) || framework.PodRestarts(&after) != framework.PodRestarts(&before) {
		t.Fatalf("the operator's Pod %s after the cut: Ready %t, restarts %d (before: %d)", after.Name, framework.PodIsReady(&after),
			framework.PodRestarts(&after), framework.PodRestarts(&before))
	}
}

// panelQuery is one query of the shipped dashboard, as test/monitoring writes them out.
type panelQuery struct {
	Panel, Row, RefID string
	Expr              string
	Instant           bool
}

// dashboardMayBeEmpty names the panel queries whose series only exist after an event this scenario does not
// cause, with the event. Every other query must return data.
var dashboardMayBeEmpty = map[string]string{
	"Step in progress/A":            "a step in progress (the cluster has settled when the dashboard is checked)",
	"Backup and restore outcomes/B": "a restore that ended",
	"Request latency (p99)/A":       "etcd's --metrics=extensive (per-method gRPC latency histograms), which Steward does not set",
	"Backup schedules/A":            "an EtcdBackupSchedule",
	"Backup schedules/B":            "an EtcdBackupSchedule",
	"Backup schedules/C":            "an EtcdBackupSchedule",
	"Backup claim usage/A":          "an EtcdBackupSchedule to a claim",
}

// requireDashboardData runs every query of the shipped Grafana dashboard against the test bed's Prometheus for
// the cluster, with Grafana's variables filled in: each must be valid PromQL, and return data unless it is one
// dashboardMayBeEmpty names.
func requireDashboardData(t *testing.T, ns, cluster string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(framework.RepoRoot(t), "test", "monitoring", "testdata", "panel-queries.json"))
	if err != nil {
		t.Fatal(err)
	}
	var queries []panelQuery
	if err := json.Unmarshal(raw, &queries); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$__rate_interval", "1m", "${__rate_interval}", "1m", "$__interval", "15s", "$namespace", ns, "${namespace}", ns,
		"$cluster", cluster, "${cluster}", cluster)
	empty := 0
	for _, q := range queries {
		id := q.Panel + "/" + q.RefID
		expr := vars.Replace(q.Expr)
		if strings.Contains(expr, "$") {
			t.Errorf("panel %s: a variable this test does not fill in: %s", id, expr)
			continue
		}
		var got []framework.PromSample
		err := testbed.Eventually(context.Background(), time.Minute, 2*time.Second, func() error {
			var err error
			got, err = framework.PromQuery(context.Background(), expr)
			if err == nil && len(got) == 0 && dashboardMayBeEmpty[id] == "" {
				return fmt.Errorf("no data")
			}
			return err
		})
		switch {
		case err != nil:
			t.Errorf("panel %s (%s): %v", id, expr, err)
		case len(got) == 0:
			empty++
			t.Logf("panel %s has no data, as expected without %s", id, dashboardMayBeEmpty[id])
		}
	}
	t.Logf("dashboard: %d panel queries run, %d with data", len(queries), len(queries)-empty)
}

// requireMetricsRefused: the operator in namespace ns serves its metrics only over HTTPS, and only to a token the
// API server authenticates and that may get /metrics: a scrape without a token gets 401, one with the token of a
// ServiceAccount without the right 403, plain HTTP nothing; the same ServiceAccount bound to the release's
// metrics-reader ClusterRole (reader) gets the metrics.
func requireMetricsRefused(t *testing.T, ns, reader string) {
	t.Helper()
	ctx := context.Background()
	pods := framework.OperatorPodsIn(t, ns)
	if len(pods) == 0 {
		t.Fatalf("no operator Pods in %s", ns)
	}
	pod := &pods[0]
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scraper"}}
	if err := framework.K8s.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	token := framework.ServiceAccountToken(t, ns, sa.Name)
	// A token the API server cannot read gets 500 rather than 401: its TokenReview answers with an error, which
	// the token webhook authenticator returns as one, and controller-runtime's filter answers any authenticator
	// error with 500. Refused either way, which is what matters: no metrics in the answer.
	for _, tc := range []struct {
		what  string
		token string
		want  []int
	}{{"no token", "", []int{http.StatusUnauthorized}}, {"a bad token", "not-a-token", []int{http.StatusUnauthorized, http.StatusInternalServerError}},
		{"a ServiceAccount without the role", token, []int{http.StatusForbidden}}} {
		code, body, err := framework.GetMetrics(pod, tc.token)
		if err != nil || !slices.Contains(tc.want, code) || strings.Contains(body, "go_goroutines") {
			t.Errorf("scrape with %s: %d (%v), want one of %v and no metrics\n%.200s", tc.what, code, err, tc.want, body)
		}
	}
	plainCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(plainCtx, http.MethodGet, "http://"+net.JoinHostPort(pod.Status.PodIP, "8443")+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.Contains(string(b), "go_goroutines") {
			t.Errorf("metrics served in plain HTTP: %s", resp.Status)
		}
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}},
	}
	if err := framework.K8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = framework.K8s.Delete(context.Background(), binding) })
	// RBAC applies a new binding within moments, and the operator caches an authorization for a while: poll.
	framework.Poll(t, "a scrape by a ServiceAccount bound to "+reader, time.Minute, func() error {
		code, body, err := framework.GetMetrics(pod, token)
		if err != nil || code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
			return fmt.Errorf("%d (%w)", code, err)
		}
		return nil
	})
}
