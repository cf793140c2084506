package etcdcluster

import (
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// assemble joins Pods, PVCs and etcd's answers into one observation, by member name, one source after the
// other: Pods, volumes, status answers, etcd's member list, the controller's memory in status, the members'
// health. Pure: newNames supplies unused member names given the names already in use.
func assemble(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, pvcs []corev1.PersistentVolumeClaim, view etcd.ClusterView,
	o resources.Options, now time.Time, newNames func(used map[string]bool) []string) *observation {
	a := &assembly{cluster: cluster, o: o, now: now, members: map[string]*plan.Member{}, pinned: map[string]bool{}, recorded: recordedSource(cluster),
		obs: &observation{pods: map[string]*corev1.Pod{}, statusOf: map[string]etcd.Status{}, nameOf: map[uint64]string{}, view: view,
			defragmented: map[string]*etcdv1alpha1.Defragmented{}}}
	a.addPods(pods)
	a.addVolumes(pvcs)
	a.addStatuses(pods, view)
	a.addMemberList(view)
	a.addExternalStatuses(view)
	a.addMemory(view)
	a.addHealth()
	a.finish(pods, newNames)
	return a.obs
}

// assembly is assemble's work in progress: the observation, and its members by name.
type assembly struct {
	cluster *etcdv1alpha1.EtcdCluster
	o       resources.Options
	now     time.Time
	obs     *observation
	members map[string]*plan.Member
	// pinned: members whose volume exists (is bound), which may tie their Pod to a node.
	pinned map[string]bool
	// recorded are the IDs of an adopted source's members, as status records them (adoption.go).
	recorded map[uint64]bool
}

// get is the member of that name, new when no source has named it yet.
func (a *assembly) get(name string) *plan.Member {
	if a.members[name] == nil {
		a.members[name] = &plan.Member{Name: name}
	}
	return a.members[name]
}

// addPods reads the member Pods: what each runs, how, and since when.
func (a *assembly) addPods(pods []corev1.Pod) {
	now := a.now
	for i := range pods {
		p := &pods[i]
		if !isMemberObject(p, a.cluster) {
			continue // not ours: never touch it
		}
		name := p.Labels[resources.LabelMember]
		a.obs.pods[name] = p
		m := a.get(name)
		m.HasPod = true
		m.Node = p.Spec.NodeName
		m.PodDeleting = p.DeletionTimestamp != nil
		if m.PodDeleting && now.After(p.DeletionTimestamp.Time) { // the deletion timestamp is when the grace period ends
			m.PodOverdue = now.Sub(p.DeletionTimestamp.Time)
		}
		m.PodReady = resources.PodReady(p)
		if started := etcdStartedAt(p); !started.IsZero() && now.After(started) {
			m.RunningFor = now.Sub(started)
		}
		m.PodVersion = p.Annotations[resources.AnnotationVersion]
		m.PodQuota = resources.PodQuota(p)
		m.PodClientCertAuth = resources.PodVerifiesClientCerts(p)
		m.PodPeerCheck = resources.PodChecksPeers(p)
		// A Pod that checks the identity was created once every member's certificate carried it, its own too.
		m.PeerIdentity = m.PodPeerCheck || resources.PodHeldPeerIdentity(a.cluster, p, a.o)
		m.PodImage, m.ContainerImage = etcdImages(p)
		m.DataLoss = dataLossOf(p)
		m.Restore = p.Annotations[resources.AnnotationRestore]
		m.PodStuck = stuckOf(p)
		m.PodTLS, _ = resources.PodTLS(p)
		m.PodBootstrapsAlone = resources.PodBootstrapsAlone(p)
		if !p.CreationTimestamp.IsZero() {
			m.PodAge = now.Sub(p.CreationTimestamp.Time)
		}
		readInitial(m, p.Annotations)
	}
}

// addVolumes reads the member PVCs: the marks Steward left on them for passes that cannot ask etcd.
func (a *assembly) addVolumes(pvcs []corev1.PersistentVolumeClaim) {
	for i := range pvcs {
		pvc := &pvcs[i]
		if !isMemberObject(pvc, a.cluster) {
			continue
		}
		name := pvc.Labels[resources.LabelMember]
		m := a.get(name)
		// A volume being deleted is as good as gone: a Pod could not mount it, and its data goes with it (while its
		// Pod runs, the Pod holds it, and the member is replaced before it stops).
		m.HasPVC, m.VolumeDeleting = pvc.DeletionTimestamp == nil, pvc.DeletionTimestamp != nil
		m.VolumeVersion, m.VolumeImage = pvc.Annotations[resources.AnnotationVersion], pvc.Annotations[resources.AnnotationImage]
		m.VolumeTLS = pvc.Annotations[resources.AnnotationTLSMode]
		m.Volume = volumeOf(pvc, a.now)
		m.Removed = pvc.Annotations[resources.AnnotationRemovedMember] != ""
		m.RetiredBy = pvc.Annotations[resources.AnnotationRetiredBy]
		m.PVC, m.VolumeHasRun = pvc.Name, pvc.Annotations[resources.AnnotationHasRun] != ""
		if d, compacted := parseDefragmented(pvc.Annotations[resources.AnnotationLastDefragmentation]); d != nil {
			a.obs.defragmented[m.Name], m.DefragmentedAtCompaction = d, compacted
			m.DefragmentedAgo, m.DefragmentRecorded = a.now.Sub(d.Time.Time), true
		}
		if r := pvc.Annotations[resources.AnnotationRestore]; r != "" {
			m.Restore = r
		}
		if m.InitialCluster == nil {
			readInitial(m, pvc.Annotations)
		}
		if pvc.Spec.VolumeName != "" {
			a.pinned[name] = true
		}
	}
}

// addStatuses reads each member's status answer (by its Pod's endpoint), the cluster version, and when the
// cluster reached it.
func (a *assembly) addStatuses(pods []corev1.Pod, view etcd.ClusterView) {
	obs := a.obs
	endpointOf := resources.MemberClientEndpoints(a.cluster, pods)
	for ep, s := range view.Statuses {
		name, ok := endpointOf[ep]
		if !ok {
			continue
		}
		if s.Err == nil {
			obs.nameOf[s.MemberID] = name
		}
		a.takeStatus(name, a.get(name), s)
	}
	obs.plan.EtcdReachable = view.ListErr == nil
	obs.plan.ClusterVersion, obs.plan.DowngradeTarget = view.ClusterVersion, view.DowngradeTarget
	var leaderCommit uint64
	for _, st := range obs.statusOf {
		if st.Err == nil && st.MemberID == st.LeaderID {
			leaderCommit = st.RaftIndex
		}
	}
	obs.versionMark = clusterVersionMark(a.cluster.Status.ClusterVersionSince, view.ClusterVersion, leaderCommit)
	if m := obs.versionMark; m != nil && m.Version == view.ClusterVersion && m.RaftIndex > 0 {
		obs.plan.ClusterVersionSince = uint64(m.RaftIndex)
	}
}

// takeStatus gives member m (of name) the status answer s: its health and what it reports, and the cluster's
// revision and leader as far as s tells them.
func (a *assembly) takeStatus(name string, m *plan.Member, s etcd.Status) {
	obs := a.obs
	obs.statusOf[name] = s
	m.Healthy = s.Healthy()
	if s.Err == nil {
		m.RunningVersion, m.StorageVersion = s.Version, s.StorageVersion
		m.AppliedIndex, m.CommitIndex = s.AppliedIndex, s.RaftIndex
		m.DBSize, m.DBSizeInUse = s.DBSizeBytes, s.DBSizeInUseBytes
		obs.plan.Revision = max(obs.plan.Revision, s.Revision)
	}
	if s.Healthy() {
		obs.plan.LeaderID = s.LeaderID
	}
}

// addMemberList reads etcd's member list, naming each member (etcdMemberNames), and drops the status answers
// that came from another member than the one asked.
func (a *assembly) addMemberList(view etcd.ClusterView) {
	obs, members, cluster := a.obs, a.members, a.cluster
	// A member that has not started yet has no name in etcd; it is recognised by the peer URL it was added with.
	// Either scheme: a member added in the middle of a switch between plaintext and TLS has either.
	byPeerURL := map[string]string{}
	for name := range members {
		for _, scheme := range []string{"http", "https"} {
			byPeerURL[resources.PeerURLWith(cluster, name, scheme, a.o)] = name
		}
	}
	for _, m := range members {
		for name, url := range m.InitialCluster {
			byPeerURL[url] = name
		}
	}
	etcdNames := etcdMemberNames(cluster, view.Members, byPeerURL, obs.statusOf, a.o)
	listed := map[uint64]bool{}
	for _, em := range view.Members {
		if listed[em.ID] {
			continue // etcd's IDs are unique: a repeated entry is a corrupt answer; the first one stands
		}
		listed[em.ID] = true
		name := etcdNames[em.ID]
		external := a.externalOf(em, name)
		if external {
			// A member of the source Steward adopts: under a name of its own, so that no rule for Steward's
			// members (a member without a Pod has lost its data; an unknown one is a stray) applies to it.
			name = plan.ExternalMemberName(em.Name, em.ID)
		}
		m := a.get(name)
		m.InEtcd, m.Started, m.ID, m.IsLearner = true, em.Name != "", em.ID, em.IsLearner
		if external {
			m.External, m.EtcdName = true, em.Name
		}
		if len(em.PeerURLs) > 0 {
			m.PeerURL = em.PeerURLs[0]
		}
		obs.nameOf[em.ID] = name
		// How long a learner's Pod has had to start its etcd: since the Pod was created (its time to catch up
		// counts from its etcd's start, RunningFor). Re-observable (a restarted operator sees the same), and a
		// learner without a Pod is Steward's to start, not the learner's fault.
		if p := obs.pods[name]; em.IsLearner && p != nil && !p.CreationTimestamp.IsZero() {
			m.LearnerFor = a.now.Sub(p.CreationTimestamp.Time)
		}
	}
	// A status answer counts for the member whose Pod was asked only if it came from that member: an answer
	// from another member ID (a Pod IP reused while the cache lags, a Pod that runs someone else's data) says
	// nothing about this member's health, and must not make one etcd member stand for two names.
	for name, st := range obs.statusOf {
		m := members[name]
		if st.Err != nil || !m.InEtcd || st.MemberID == m.ID {
			continue
		}
		m.Healthy, m.RunningVersion, m.StorageVersion, m.AppliedIndex, m.CommitIndex = false, "", "", 0, 0
		delete(obs.statusOf, name)
		if obs.nameOf[st.MemberID] == name && !listed[st.MemberID] {
			delete(obs.nameOf, st.MemberID)
		}
	}
}

// addMemory reads the controller's memory in status: the members etcd listed when it last answered, and those
// that have served.
func (a *assembly) addMemory(view etcd.ClusterView) {
	// Without a member list, the members etcd listed when it last answered (the controller's memory in status)
	// are still members, even those with neither Pod nor volume left: status says they have no data, and they
	// count toward the quorum the others need.
	if view.ListErr != nil {
		for _, sm := range a.cluster.Status.Members {
			if a.members[sm.Name] != nil || sm.ID == "" {
				continue
			}
			m := a.get(sm.Name)
			m.Remembered = true
			if id, err := etcd.ParseID(sm.ID); err == nil {
				m.ID = id
			}
		}
	}
	// Members status lists with the version they reported have run (plan.HasRun): how Steward knows it of a
	// volume from before it recorded that, while etcd gives no member list.
	for _, sm := range a.cluster.Status.Members {
		if m := a.members[sm.Name]; m != nil && sm.ID != "" && sm.Version != "" {
			m.ServedBefore = true
		}
	}
}

// addHealth marks members stuck on their spec and keeps each unhealthy member's clock
// (observation.unhealthySince, Member.UnhealthyFor), from the start recorded in status (the controller's
// memory).
func (a *assembly) addHealth() {
	obs, members, now := a.obs, a.members, a.now
	since := map[string]time.Time{}
	for _, m := range a.cluster.Status.Members {
		if m.UnhealthySince != nil {
			since[m.Name] = m.UnhealthySince.Time
		}
	}
	// A voter whose Pod the scheduler cannot place, on no volume yet, is stuck on its spec (unschedulable). Not a
	// learner: it holds no vote and no data, and one that never starts would block every later membership change,
	// so it is replaced as any learner whose etcd does not start (plan's stuck-learner rule).
	for name, p := range obs.pods {
		if m := members[name]; m.PodStuck == "" && !m.IsLearner && !a.pinned[name] && unschedulable(p) {
			m.PodStuck = corev1.PodReasonUnschedulable
		}
	}
	obs.unhealthySince = map[string]time.Time{}
	for name, m := range members {
		// A member whose Pod is stuck on what the spec asks for is not replaced, however long it is down, so it
		// keeps no clock: once the spec or the image is fixed, its etcd gets the whole replaceUnhealthyAfter to
		// start, instead of being replaced by the first pass that no longer sees it stuck.
		if m.Healthy || (!m.HasPod && !m.InEtcd) || m.PodStuck != "" {
			continue
		}
		start, ok := since[name]
		if !ok {
			start = now
		}
		obs.unhealthySince[name] = start
		m.UnhealthyFor = unhealthyFor(obs.pods[name], start, now)
	}
}

// unhealthyFor is how long a member unhealthy since start counts as down, given its Pod p (nil: none).
func unhealthyFor(p *corev1.Pod, start, now time.Time) time.Duration {
	d := now.Sub(start)
	// A member whose etcd started again (its node came back, the kubelet restarted it) gets the whole
	// replaceUnhealthyAfter from that start to catch up: the time its node was down is not its own. Only while
	// the container runs: a crash loop spends most of its time waiting to restart, and the full clock applies.
	if started := etcdStartedAt(p); started.After(start) {
		d = now.Sub(started)
	}
	// Likewise a member whose kubelet came back: after a node's outage the returning kubelet finds the
	// member's containers gone and reports them not ready, while its etcd has yet to start again. Without
	// this, members whose nodes return together after an outage longer than replaceUnhealthyAfter (a rack's
	// power, a majority of nodes) would be replaced by the first pass with a quorum again, while their Pods
	// were still starting on their volumes. (The node controller marks the Pods of a node that stops
	// answering not Ready, but leaves ContainersReady as the kubelet last reported it, so a lost node's
	// member keeps its clock.)
	if back := containersNotReadySince(p); back.After(start) && back.After(now.Add(-d)) {
		d = now.Sub(back)
	}
	// A member whose Pod was placed and has not run etcd yet is still starting, and a node slow to start Pods
	// (the node authorizer's lag on a new Pod's claim and Secrets, seen to hold a Pod 15 s) must not count
	// against it: its clock runs only from plan.PodStartGrace after the placement, as a starting learner's
	// does. Without it, a member waiting for a node (unschedulable until one was uncordoned) was replaced by
	// the first pass that found its Pod placed and still mounting its volume.
	if placed := placedAt(p); !placed.IsZero() && !etcdHasRun(p) {
		if grace := placed.Add(plan.PodStartGrace); !now.After(grace) {
			d = 0
		} else if since := now.Sub(grace); since < d {
			d = since
		}
	}
	return d
}

// finish lists the members by name, with the new member names the plan may use, and what follows from all
// sources together: whether the cluster has formed, and since when it has lost quorum.
func (a *assembly) finish(pods []corev1.Pod, newNames func(used map[string]bool) []string) {
	obs, cluster, o, now := a.obs, a.cluster, a.o, a.now
	used := map[string]bool{}
	for name := range a.members {
		used[name] = true
	}
	obs.plan.NewMemberNames = newNames(used)
	obs.plan.PeerURL = func(name string) string { return resources.PeerURL(cluster, name, o) }
	names := make([]string, 0, len(a.members))
	for name := range a.members {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		obs.plan.Members = append(obs.plan.Members, *a.members[name])
	}
	obs.plan.Bootstrapped = cluster.Status.Bootstrapped || plan.BootstrapComplete(obs.plan.Members, obs.plan.EtcdReachable)
	obs.quorumLostSince = quorumLostSince(cluster, pods, obs.plan, now)
	if obs.quorumLostSince != nil {
		obs.plan.QuorumLostFor = now.Sub(*obs.quorumLostSince)
	}
}

// etcdMemberNames names every member of etcd's list, by ID. A started member is known by the name it reports,
// one not started yet by the peer URL it was added with (a member Steward created, or one this cluster's
// naming recognises); anything else is plan.StrayMemberName(id). Names are unique: when several members claim one name
// (two members started with the same --name, or a hostile entry), the one whose Pod answered with its ID keeps
// it, else the lowest ID, and the others are observed as strays, so that no member hides another.
func etcdMemberNames(cluster *etcdv1alpha1.EtcdCluster, list []etcd.Member, byPeerURL map[string]string, statusOf map[string]etcd.Status,
	o resources.Options) map[uint64]string {
	candidate := map[uint64]string{}
	claims := map[string][]uint64{}
	for _, em := range list {
		if _, seen := candidate[em.ID]; seen {
			continue
		}
		name := em.Name
		for _, u := range em.PeerURLs {
			if n, ok := byPeerURL[u]; ok && name == "" {
				name = n
			}
		}
		for _, u := range em.PeerURLs {
			if n, ok := resources.MemberNameFromPeerURL(cluster, u, o); ok && name == "" {
				name = n
			}
		}
		if name == "" {
			name = plan.StrayMemberName(em.ID)
		}
		candidate[em.ID] = name
		claims[name] = append(claims[name], em.ID)
	}
	names := map[uint64]string{}
	taken := map[string]bool{}
	var losers []uint64
	for name, ids := range claims {
		winner := ids[0] // the list is sorted by ID
		if st, ok := statusOf[name]; ok && st.Err == nil && slices.Contains(ids, st.MemberID) {
			winner = st.MemberID
		}
		names[winner], taken[name] = name, true
		for _, id := range ids {
			if id != winner {
				losers = append(losers, id)
			}
		}
	}
	slices.Sort(losers)
	for _, id := range losers {
		name := plan.StrayMemberName(id)
		for taken[name] {
			name += "-" + etcd.FormatID(id)
		}
		names[id], taken[name] = name, true
	}
	return names
}

// quorumLostSince is when the formed cluster was first seen without quorum in its current loss of it
// (plan.QuorumLost, given the cluster's Ready Pods), nil while it has quorum: the start is the controller's memory
// in status.
func quorumLostSince(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, obs plan.Observation, now time.Time) *time.Time {
	ready := 0
	for i := range pods {
		if metav1.IsControlledBy(&pods[i], cluster) && pods[i].DeletionTimestamp == nil && resources.PodReady(&pods[i]) {
			ready++
		}
	}
	// A hibernated cluster (and one resuming, until it is Available again) has no quorum by request: the
	// quorum-loss policy must not re-seed it from a backup.
	if !plan.QuorumLost(obs, ready) || etcdv1alpha1.Hibernating(cluster) {
		return nil
	}
	if s := cluster.Status.QuorumLostSince; s != nil {
		t := s.Time
		return &t
	}
	return &now
}
