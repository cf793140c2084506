package plan

// DataLossEvidence reads a crashed etcd container's termination message: the evidence that the member's data dir
// was emptied or corrupted on a volume that is still there, or "" when there is none. Such a member must not rejoin
// under its old member ID: it would vote without the entries it acknowledged. Only an ExitReport that
// `steward-agent run-etcd` wrote counts, with one of the data-loss reasons; never etcd's log, into which a client
// can write any text as a key (etcd logs keys in its slow-request warnings). A Pod whose etcd runs without this
// release's agent (created by an older Steward, or with an agent image of another release) has no report: its
// crash is no evidence, and its member is replaced, if at all, as any unhealthy member is (after
// spec.replaceUnhealthyAfter). Pure and total: any input, including a cut-off or binary one, is fine.
func DataLossEvidence(terminationMessage string) string {
	r, err := ParseExitReport(terminationMessage)
	if err != nil {
		return ""
	}
	return dataLossEvidence[r.Reason]
}
