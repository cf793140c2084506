package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// none is what an empty cell shows, as kubectl prints it.
const none = "<none>"

// WriteStatus prints s as `kubectl steward status` does: a header, the members table, certificates, the last
// backup, the conditions and the step in progress. now is the time relative ages are computed against.
func WriteStatus(w io.Writer, s Status, now time.Time) error {
	p := &printer{w: w}
	p.header(s, now)
	p.line("")
	p.members(s, now)
	p.line("")
	p.certificates(s, now)
	if b := s.LastBackup; b != nil {
		when := "time unknown"
		if b.Time != nil {
			when = stamp(b.Time) + " (" + Since(now, b.Time.Time) + ")"
		}
		p.line("Last backup:     %s, %s", b.Name, when)
	} else {
		p.line("Last backup:     none")
	}
	p.line("")
	p.conditions(s, now)
	if st := s.Step; st != nil {
		p.line("")
		p.line("Step in progress: %s for %s: %s", st.Reason, age(now, st.Since.Time), oneLine(st.Message))
	}
	return p.err
}

// header is the cluster's name, version, member counts, quorum, endpoint, ID and spec generation.
func (p *printer) header(s Status, now time.Time) {
	title := s.Namespace + "/" + s.Name
	if s.Paused {
		title += " (paused: Steward changes nothing)"
	}
	p.line("Cluster:         %s", title)
	version := s.Version
	if s.CurrentVersion != "" && s.CurrentVersion != s.Version {
		version = fmt.Sprintf("%s (members still at %s)", s.Version, s.CurrentVersion)
	}
	if s.ClusterVersion != "" {
		version += ", cluster version " + s.ClusterVersion
	}
	if s.DowngradeTarget != "" {
		version += ", downgrading to " + s.DowngradeTarget
	}
	p.line("Version:         %s", version)
	leader := s.Leader
	if leader == "" {
		leader = "none"
	}
	p.line("Members:         %d desired, %d ready, leader %s", s.DesiredMembers, s.ReadyMembers, leader)
	if h := s.Hibernation; h != nil {
		p.line("Hibernation:     %s", hibernation(h, now))
	}
	if s.QuorumLostSince != nil {
		p.line("Quorum:          LOST since %s (%s)", stamp(s.QuorumLostSince), Since(now, s.QuorumLostSince.Time))
	}
	p.line("Client endpoint: %s", orNone(s.ClientEndpoint))
	if s.External != "" {
		p.line("External:        %s", s.External)
	}
	p.line("Cluster ID:      %s", orNone(s.ClusterID))
	if s.ObservedGeneration != s.Generation {
		p.line("Spec:            generation %d, Steward has acted on %d", s.Generation, s.ObservedGeneration)
	}
}

// hibernation is the phase, since when, and what the kept volumes hold.
func hibernation(h *Hibernation, now time.Time) string {
	line := h.Phase
	if !h.Since.IsZero() {
		line += " since " + stamp(&h.Since) + " (" + Since(now, h.Since.Time) + ")"
	}
	if kept := kept(h.Members, h.DataSizeBytes, h.Revision); len(kept) > 0 {
		line += "; " + strings.Join(kept, ", ")
	}
	return line
}

// members is the members table and the alarms raised.
func (p *printer) members(s Status, now time.Time) {
	if len(s.Members) == 0 {
		p.line("No members yet.")
	} else {
		tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
		p.to(tw, "NAME\tID\tROLE\tVERSION\tHEALTHY\tDB SIZE\tIN USE\tPOD\tNODE")
		for _, m := range s.Members {
			healthy := fmt.Sprint(m.Healthy)
			if !m.Healthy && m.UnhealthySince != nil {
				healthy = "false (" + age(now, m.UnhealthySince.Time) + ")"
			}
			if !m.InStatus {
				healthy = "-"
			}
			size := "-"
			if m.DBSizeBytes > 0 {
				size = humanize.IBytes(uint64(m.DBSizeBytes))
			}
			inUse := "-"
			if m.DBSizeInUseBytes > 0 {
				inUse = humanize.IBytes(uint64(m.DBSizeInUseBytes))
			}
			p.to(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", m.Name, dash(m.ID), dash(m.Role), dash(m.Version), healthy, size,
				inUse, m.Pod, dash(m.Node))
		}
		p.flush(tw)
	}
	if len(s.Alarms) > 0 {
		var alarms []string
		for _, a := range s.Alarms {
			alarms = append(alarms, a.Alarm+" on "+a.Member)
		}
		p.line("Alarms:          %s (etcd refuses writes while NOSPACE is raised; see docs/operations/alerts-and-runbooks.md)", strings.Join(alarms, ", "))
	}
}

// certificates is the TLS provider and each certificate's Secret and expiry.
func (p *printer) certificates(s Status, now time.Time) {
	if s.TLS.Provider == etcdv1alpha1.TLSProviderNone && s.TLS.ClientSecret == "" {
		p.line("Certificates:    none (plaintext: tls.provider None)")
		return
	}
	p.line("Certificates:    provider %s", s.TLS.Provider)
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	p.to(tw, "  CERTIFICATE\tSECRET\tEXPIRES")
	p.to(tw, "  CA\t%s\t%s", dash(s.TLS.CASecret), expiry(now, s.TLS.CANotAfter))
	// With providers Steward and CertManager each member has its own <member>-tls.
	perMember := s.TLS.MemberSecret
	if perMember == "" {
		perMember = "<member>-tls"
	}
	p.to(tw, "  members\t%s\t%s", perMember, expiry(now, s.TLS.NotAfter))
	p.to(tw, "  client\t%s\t%s", dash(s.TLS.ClientSecret), expiry(now, s.TLS.NotAfter))
	p.flush(tw)
	p.line("  (members and client: the first of them to expire; Steward renews each at two thirds of its lifetime)")
}

// conditions is the conditions table.
func (p *printer) conditions(s Status, now time.Time) {
	if len(s.Conditions) == 0 {
		p.line("Conditions:      none yet (Steward has not reconciled the cluster)")
		return
	}
	tw := tabwriter.NewWriter(p.w, 0, 8, 2, ' ', 0)
	p.to(tw, "CONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range s.Conditions {
		p.to(tw, "%s\t%s\t%s\t%s\t%s", c.Type, c.Status, c.Reason, age(now, c.LastTransitionTime.Time), oneLine(c.Message))
	}
	p.flush(tw)
}

// printer writes lines and keeps the first error, so that the layout code reads top to bottom.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(format string, args ...any) { p.to(p.w, format, args...) }

func (p *printer) to(w io.Writer, format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(w, format+"\n", args...)
	}
}

func (p *printer) flush(tw *tabwriter.Writer) {
	if p.err == nil {
		p.err = tw.Flush()
	}
}

// stamp is a time as RFC 3339 in UTC, the way the API serialises it.
func stamp(t *metav1.Time) string { return t.UTC().Format(time.RFC3339) }

func expiry(now time.Time, t *metav1.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(t) + " (" + Since(now, t.Time) + ")"
}

// duration is how long since t, without "ago", for columns headed SINCE.
func age(now, t time.Time) string { return strings.TrimSuffix(Since(now, t), " ago") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// oneLine keeps a table row on one line: condition messages may hold newlines from the kubelet.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
