package properties

import (
	gocmp "cmp"
	"fmt"
	"iter"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// ReferenceOptions configures MatchesReference. Zero values take the
// defaults.
type ReferenceOptions struct {
	// Kinds are the kinds compared (as "StatefulSet"), with the objects
	// they own through owner references, and the claims. Empty: every
	// observed object.
	Kinds []string
	// Ignore are more fields to leave out, in the syntax of Write.Field
	// (status.phase, metadata.labels[app.kubernetes.io/name]), of every
	// kind that has them. A path that matches nothing in a case is said
	// once in the verdict's detail.
	Ignore []string
	// Within is the deadline after the faults heal. Zero means 30 s.
	Within time.Duration
	// Stable is how long the case must then keep matching. Zero means 2 s.
	Stable time.Duration
	// Rest: a case that differs and has been at rest this long after the
	// heal fails then, before Within (see Converges). Zero means a third of
	// Within, at least 10 s; negative waits out Within.
	Rest time.Duration
}

// ReferenceRun is a case's reference: the same fixtures and the same user
// changes (and other writers' changes), with no fault, run to a settled
// end.
type ReferenceRun struct {
	// Trace is the reference run's; its last state is the end state the
	// case is compared with.
	Trace *Trace
	// Failed is set when a property failed on the reference run itself:
	// the controller fails without faults. FailedProperty names it.
	Failed         error
	FailedProperty string
	// NetOfBursts is set for a case whose reference run made only the net
	// changes of its bursts (faults.BurstStep.Net). An object only one
	// run has, or a group of made-up names of another size, may then be
	// the history of a change that one run acted on and the other never
	// made (a Deployment's ReplicaSet of an image set and set back): only
	// the objects both runs have are compared.
	NetOfBursts bool
	// Alternative, when set, is the reference run of the case's plan
	// without the user changes that later ones set again before the case
	// had carried them out (a storage growth whose patches a fault
	// refused, then a smaller size asked for): the case may end where
	// either run ends. A level-triggered controller acts on the spec it
	// sees, and one that never got to act on a value asked for and then
	// replaced ends as if it had never been asked; the reference run,
	// which carried it out, may end elsewhere (a shrink refused).
	Alternative *ReferenceRun
}

// Referenced is a property judged against its case's reference run
// (Trace.Reference): the harness runs one for every case of a spec that
// has such a property.
type Referenced interface {
	Property
	// ReferenceKinds are the kinds the property compares; nil means
	// every kind observed.
	ReferenceKinds() []string
	// Reached reports whether the case's state at caseAt matches the
	// reference run's at refAt, compared as the end states are: whether
	// the case had carried out what the reference had by then (the
	// harness asks it of the state just before a user change that sets
	// an earlier one's fields again; see ReferenceRun.Alternative).
	Reached(tr *Trace, caseAt, refAt time.Time) bool
	// judgesReference keeps the interface to this package's properties:
	// the harness caches reference runs by property.
	judgesReference()
}

// MatchesReference holds when, after the faults heal, the case's objects
// come to match the end state of its reference run within opts.Within and
// keep matching for opts.Stable: a differential oracle that needs no
// predicate of the user's (Sieve's, OSDI'22). The faults may change how
// the controller gets there, not where it ends. The reference run makes
// the case's user changes and another writer's, and the node losses that
// last past the heal (a change of the world, not a passing fault); of a
// burst, only the changes no later one of it makes again: a
// level-triggered controller ends where the last value takes it, however
// fast the values came (see ReferenceRun.NetOfBursts). Likewise a user
// change that a later one sets again before the case carried it out: the
// case may match the reference run without it instead (see
// ReferenceRun.Alternative).
//
// What differs between any two healthy runs is left out: UIDs (in values
// too, as the object they name), resource versions, generations and
// observedGeneration, managedFields, times (any RFC 3339 string), made-up
// names (a generated name's random suffix, a controller's template hash
// such as a ReplicaSet's or a ControllerRevision's: such objects are
// compared as a group; in values too, a list of pod names in an
// annotation), the case's namespace and node names in values,
// pod IPs and node names, cluster IPs and bound volume names, restart
// counts and containers' last states, a claim's resize bookkeeping
// (allocatedResources: a claim grown has it, one made at its size not),
// and Deployments' revision annotations. Objects still being deleted when
// the case ends (a pod on a lost node, a claim whose pod still runs) are
// in neither run's comparison, and the status of their owners is not
// compared: no controller can finish such a deletion. Nor are claims that
// no pod of either run mounts: a StatefulSet leaves its claims behind
// when it scales down, so that they exist says how far the replicas once
// went.
//
// One thing of the way there is compared too: the claims the controller
// deletes. A claim holds the data its pods wrote, and no fault asks a
// correct controller to delete more of them than it does with the user
// changes alone; a stale view that deletes the claims of a new
// incarnation of their owner leaves an end state like the reference's
// (claims made again, empty). Such a case fails as soon as the controller
// has deleted more; a deletion in the course of a user change when the
// reference run had no such claim yet (it made the change before its
// claims were made) does not count.
//
// Its message names the objects and fields that differ; its detail holds
// the go-cmp diff (-reference +case).
func MatchesReference(opts ReferenceOptions) Property {
	if opts.Within == 0 {
		opts.Within = 30 * time.Second
	}
	if opts.Stable == 0 {
		opts.Stable = 2 * time.Second
	}
	p := &matchesReference{opts: opts}
	for _, path := range opts.Ignore {
		p.ignore = append(p.ignore, splitField(path))
	}
	return p
}

type matchesReference struct {
	opts   ReferenceOptions
	ignore [][]string // opts.Ignore, split
}

// MatchesReferenceName is MatchesReference's name.
const MatchesReferenceName = "matches-reference"

func (*matchesReference) Name() string               { return MatchesReferenceName }
func (p *matchesReference) Horizon() time.Duration   { return p.opts.Within + p.opts.Stable }
func (p *matchesReference) ReferenceKinds() []string { return p.opts.Kinds }
func (*matchesReference) judgesReference()           {}

func (p *matchesReference) Check(tr *Trace) Verdict {
	// History: decided as soon as it happens, faults or not.
	if tr.Reference != nil && tr.Reference.Failed == nil {
		if lost := lostClaims(tr); lost != nil {
			return *lost
		}
	}
	switch {
	case tr.Healed.IsZero():
		return pending("faults not healed yet")
	case tr.Reference == nil:
		if tr.Final {
			return fail(fmt.Errorf("%s: the case has no reference run", MatchesReferenceName), "the harness ran none")
		}
		return pending("no reference run yet")
	case tr.Reference.Failed != nil:
		return fail(fmt.Errorf("%s: the reference run failed: %w", MatchesReferenceName, tr.Reference.Failed),
			"the controller fails with the user changes alone, without faults")
	}
	first := max(tr.stateAt(tr.Healed), 0)
	if first >= len(tr.States) || len(tr.Reference.Trace.States) == 0 {
		return p.late(tr, "no state observed", "")
	}
	v, matched := p.against(tr, tr.Reference, first)
	if alt := tr.Reference.Alternative; !matched && alt != nil && alt.Failed == nil && len(alt.Trace.States) > 0 {
		if altV, ok := p.against(tr, alt, first); ok {
			altV.Detail += "; the reference is its plan's without the user changes set again before the case carried them out"
			return altV
		}
	}
	return v
}

// against judges the case against the end state of ref; matched is set
// when its newest state matches.
func (p *matchesReference) against(tr *Trace, ref *ReferenceRun, first int) (v Verdict, matched bool) {
	// Leave out what either end holds in deletion, from both.
	newest := tr.States[len(tr.States)-1]
	refState := ref.Trace.States[len(ref.Trace.States)-1]
	seen := seenIn(tr.States, ref.Trace.States)
	newestNames, refNames := namesOf(newest, seen), namesOf(refState, seen)
	heldKeys, owners, mounted := held([]State{newest, refState}, []names{newestNames, refNames})
	used := map[int]bool{}
	want := p.snapshot(refState, refNames, heldKeys, owners, mounted, used)
	got := p.snapshot(newest, newestNames, heldKeys, owners, mounted, used)
	if ref.NetOfBursts {
		want, got = bothHave(want, got)
	}
	unused := p.unused(used)
	if !cmp.Equal(want, got) {
		return p.late(tr, differences(want, got), cmp.Diff(want, got)+unused), false
	}
	// Matching now: since when? Scan back no further than Stable.
	since := tr.Healed
	for i := len(tr.States) - 2; i >= first; i-- {
		if tr.States[i+1].At.Before(tr.End.Add(-p.opts.Stable)) {
			since = tr.States[i+1].At
			break
		}
		then := p.snapshot(tr.States[i], namesOf(tr.States[i], seen), heldKeys, owners, mounted, used)
		if ref.NetOfBursts {
			maps.DeleteFunc(then, func(key string, _ []any) bool { _, ok := want[key]; return !ok })
		}
		if !cmp.Equal(want, then) {
			since = tr.States[i+1].At
			break
		}
	}
	took := max(since.Sub(tr.Healed), 0)
	if tr.End.Sub(since) >= p.opts.Stable || tr.Final {
		return pass("matches the reference %v after the heal%s", took, unused), true
	}
	return pending("matches the reference since %v after the heal", took), true
}

func (p *matchesReference) Reached(tr *Trace, caseAt, refAt time.Time) bool {
	if tr.Reference == nil {
		return false
	}
	i, j := tr.stateAt(caseAt), tr.Reference.Trace.stateAt(refAt)
	if i < 0 || j < 0 {
		return false
	}
	s, r := tr.States[i], tr.Reference.Trace.States[j]
	seen := seenIn(tr.States, tr.Reference.Trace.States)
	sNames, rNames := namesOf(s, seen), namesOf(r, seen)
	heldKeys, owners, mounted := held([]State{s, r}, []names{sNames, rNames})
	used := map[int]bool{}
	want := p.snapshot(r, rNames, heldKeys, owners, mounted, used)
	got := p.snapshot(s, sNames, heldKeys, owners, mounted, used)
	if tr.Reference.NetOfBursts {
		want, got = bothHave(want, got)
	}
	return cmp.Equal(want, got)
}

// lostClaims fails a case whose controller deleted more claims than the
// reference run's did (a claim of a generated name counts as its
// generateName and a star); nil when none.
func lostClaims(tr *Trace) *Verdict {
	if len(claimsDeleted(tr, nil)) == 0 {
		return nil // the common case, without reading every state for names
	}
	prefixes := seenIn(tr.States, tr.Reference.Trace.States).prefixes
	deleted, ref := claimsDeleted(tr, prefixes), claimsDeleted(tr.Reference.Trace, prefixes)
	// A claim the reference never had is not one it kept: a burst of
	// replica changes (2, 5, 2) makes claims 3 and 4 in one run and not in
	// another, as the controller happens to see the 5.
	had := map[string]bool{}
	for _, st := range tr.Reference.Trace.States {
		for _, c := range st.ByKind("PersistentVolumeClaim") {
			had[stableClaimName(c.GetName(), prefixes)] = true
		}
	}
	// Nor is one it did not have yet, or had only as one being deleted,
	// when the user change came in whose course the case deleted it: a
	// Database deleted before its claims were made (a setup that settled
	// early under load), or re-created again before the claims its last
	// re-create deleted were made anew, has none to reclaim.
	changes, refChanges := tr.UserChanges(), tr.Reference.Trace.UserChanges()
	for name, times := range deleted {
		deleted[name] = slices.DeleteFunc(times, func(at time.Time) bool {
			// The reference's time of the case's last user change before
			// the deletion (none before any, or when it made fewer).
			k := sort.Search(len(changes), func(i int) bool { return changes[i].After(at) }) - 1
			return k >= 0 && k < len(refChanges) && !hadLiveAt(tr.Reference.Trace, refChanges[k], name, prefixes)
		})
	}
	var lost, when []string
	var e Evidence
	for _, name := range slices.Sorted(maps.Keys(deleted)) {
		if n := len(deleted[name]); n > len(ref[name]) && had[name] {
			lost = append(lost, fmt.Sprintf("PersistentVolumeClaim %s (%d, the reference %d)", name, n, len(ref[name])))
			for _, at := range deleted[name] {
				when = append(when, fmt.Sprintf("%s at %v", name, at.Sub(tr.Start).Round(time.Millisecond)))
				e.Marks = append(e.Marks, Mark{At: at, Label: "the controller deletes PersistentVolumeClaim " + name})
			}
		}
	}
	if lost == nil {
		return nil
	}
	slices.SortStableFunc(e.Marks, func(a, b Mark) int { return a.At.Compare(b.At) })
	v := fail(fmt.Errorf("%s: the controller deleted more claims than in the reference run: %s", MatchesReferenceName, strings.Join(lost, ", ")),
		"the controller's first deletion of each (from the case's start): %s; %s", strings.Join(when, ", "), claimHistory(tr.Reference.Trace)).with(e)
	return &v
}

// claimHistory tells what became of the claims in the reference run, for
// the detail: its user changes and every claim deletion, by whom.
func claimHistory(ref *Trace) string {
	var changes, deletes []string
	for _, at := range ref.UserChanges() {
		changes = append(changes, at.Sub(ref.Start).Round(time.Millisecond).String())
	}
	for _, r := range ref.Requests {
		if r.Resource == "persistentvolumeclaims" && r.Subresource == "" && r.Verb == "delete" {
			deletes = append(deletes, fmt.Sprintf("%s by %s → %d at %v", r.Name, r.User, r.Code, r.At.Sub(ref.Start).Round(time.Millisecond)))
		}
	}
	return fmt.Sprintf("the reference run's user changes at [%s] and its claim deletions [%s] (from its start; its controller %s)",
		strings.Join(changes, " "), strings.Join(deletes, ", "), ref.Controller)
}

// hadLiveAt: tr had claim name (stable), not being deleted, at `at` (true
// before its first state).
func hadLiveAt(tr *Trace, at time.Time, name string, prefixes []string) bool {
	i := tr.stateAt(at)
	if i < 0 {
		return true
	}
	return slices.ContainsFunc(tr.States[i].ByKind("PersistentVolumeClaim"), func(c *unstructured.Unstructured) bool {
		return stableClaimName(c.GetName(), prefixes) == name && c.GetDeletionTimestamp() == nil
	})
}

// claimsDeleted are, by claim name, the times the controller deleted a
// claim of that name: its first successful delete of each incarnation
// (a create of the name begins the next), as the API server's audit log
// has them. A controller that deletes a claim again while it waits for its
// pods to let go (the claim is held by its protection finalizer) deletes
// one claim.
func claimsDeleted(tr *Trace, prefixes []string) map[string][]time.Time {
	out := map[string][]time.Time{}
	if tr.Controller == "" {
		return out
	}
	counted := map[string]bool{} // this incarnation of the name is counted
	for _, r := range tr.Requests {
		if r.Resource != "persistentvolumeclaims" || r.Subresource != "" || r.Name == "" || r.Code >= 300 {
			continue
		}
		switch {
		case r.Verb == "create":
			delete(counted, r.Name)
		case r.Verb == "delete" && r.User == tr.Controller && !counted[r.Name]:
			counted[r.Name] = true
			name := stableClaimName(r.Name, prefixes)
			out[name] = append(out[name], r.At)
		}
	}
	return out
}

// stableClaimName is a claim's name, or for a generated one its
// generateName and a star.
func stableClaimName(name string, prefixes []string) string {
	for _, g := range prefixes {
		if rest, ok := strings.CutPrefix(name, g); ok && madeUp(rest, 5, 5) {
			return g + "*"
		}
	}
	return name
}

// late judges a case whose newest state differs from the reference's.
func (p *matchesReference) late(tr *Trace, what, diff string) Verdict {
	if v, owed := tr.notJudged(tr.Healed.Add(p.opts.Within+p.opts.Stable), restFor(p.opts.Rest, p.opts.Within), "differs from the reference: "+what); owed {
		return v
	}
	since, rest := tr.atRest(restFor(p.opts.Rest, p.opts.Within))
	if tr.Final || rest || tr.End.Sub(tr.Healed) > p.opts.Within+p.opts.Stable {
		when := fmt.Sprintf("%v after the heal", Round(tr.End.Sub(tr.Healed)))
		if rest && !tr.Final {
			when = fmt.Sprintf("at rest since %v after the heal, for %v", Round(since.Sub(tr.Healed)), Round(tr.End.Sub(since)))
		}
		return fail(fmt.Errorf("%s: the end state differs from the reference run's: %s", MatchesReferenceName, what),
			"%s; -reference +case:\n%s", when, clip(diff, 8000)).with(Evidence{
			Marks: []Mark{{At: tr.End, Label: "the end state compared: " + what}},
			Spans: []Span{{From: tr.Healed, To: tr.End, Label: "after the heal: judged against the reference run's end state"}},
		})
	}
	return pending("differs from the reference: %s", what)
}

func (p *matchesReference) unused(used map[int]bool) string {
	var out []string
	for i, path := range p.opts.Ignore {
		if !used[i] {
			out = append(out, path)
		}
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf("; Ignore paths that matched nothing: %s", strings.Join(out, ", "))
}

// ignoredFields are left out wherever they appear: they differ between
// any two healthy runs.
var ignoredFields = map[string]bool{
	"uid": true, "resourceVersion": true, "generation": true, "managedFields": true, "selfLink": true,
	"observedGeneration": true, "collisionCount": true,
	"restartCount": true, "lastState": true, "containerID": true, "imageID": true,
	"podIP": true, "podIPs": true, "hostIP": true, "hostIPs": true, "nodeName": true,
	"clusterIP": true, "clusterIPs": true, "volumeName": true,
	// Ports the API server draws for a Service of type NodePort or
	// LoadBalancer.
	"nodePort": true, "healthCheckNodePort": true,
	// A claim's resize bookkeeping: set on a claim grown, never on one
	// made at the size (a storage change that came before or after a
	// re-create made the claims); its capacity and request are compared.
	"allocatedResources": true, "allocatedResourceStatuses": true,
	"deletionTimestamp": true, "deletionGracePeriodSeconds": true,
}

// ignoredKinds are a history or a heartbeat, not a state: a StatefulSet's
// ControllerRevisions (one deleted comes back only at the next sync),
// Events, leader election's Leases.
var ignoredKinds = map[string]bool{"ControllerRevision": true, "Event": true, "Lease": true}

// ignoredAnnotations count a history, not a state.
var ignoredAnnotations = []string{"deployment.kubernetes.io/revision", "deployment.kubernetes.io/revision-history"}

// randomChars are those of the API server's generated name suffixes and
// of controllers' template hashes (apimachinery's rand.SafeEncodeString).
const randomChars = "bcdfghjklmnpqrstvwxz2456789"

func madeUp(suffix string, least, most int) bool {
	return len(suffix) >= least && len(suffix) <= most && strings.Trim(suffix, randomChars) == ""
}

// names are what a run calls its objects, and what every run does.
type names struct {
	// key is an object's kind and stable name.
	key map[*unstructured.Unstructured]string
	// grouped: the object's name was made up for this run, so it is one
	// of a group of its stable name.
	grouped map[*unstructured.Unstructured]bool
	// stable maps a made-up name (or a template hash) to its stable form.
	stable map[string]string
	// uids rewrites the objects' UIDs in values to their keys.
	uids *strings.Replacer
	// objects are the names of the state's objects: a value that is one
	// of them, a dash and a hash names a revision of its template (a
	// StatefulSet's currentRevision, its pods' controller-revision-hash).
	objects map[string]bool
	// generated matches a generated name inside a longer value (a list of
	// pod names in an annotation), its generateName as the first group:
	// of this run's objects, or of those it deleted. Nil when none.
	generated *regexp.Regexp
	// addresses name the IPs the cluster gave the state's objects (a
	// pod's, a node's, a Service's cluster IP) by what holds them, and
	// those of the pods gone by then as such: a controller that copies one
	// into its own object (a head pod's IP as a status field's) shows
	// another in every run.
	addresses map[string]string
}

// runsSeen is what any state of two runs held, whichever state values
// are judged in: the generateNames of their objects, sorted, each once
// (names made up for objects gone by the end still show in values: an
// annotation that lists every pod made), and the IPs of their pods.
type runsSeen struct {
	prefixes []string
	podIPs   map[string]bool
}

func seenIn(runs ...[]State) runsSeen {
	prefixes, podIPs := map[string]bool{}, map[string]bool{}
	for _, states := range runs {
		for _, st := range states {
			for _, o := range st.Objects {
				if g := o.GetGenerateName(); g != "" {
					prefixes[g] = true
				}
				if o.GetKind() == "Pod" {
					for _, ip := range podAddresses(o, "podIP", "podIPs") {
						podIPs[ip] = true
					}
				}
			}
		}
	}
	return runsSeen{prefixes: slices.Sorted(maps.Keys(prefixes)), podIPs: podIPs}
}

// podAddresses are the IPs of a pod's status field one (a string) and
// many (a list of {ip: ...}).
func podAddresses(o *unstructured.Unstructured, one, many string) []string {
	var out []string
	if ip, _, _ := unstructured.NestedString(o.Object, "status", one); ip != "" {
		out = append(out, ip)
	}
	list, _, _ := unstructured.NestedSlice(o.Object, "status", many)
	for _, item := range list {
		if m, ok := item.(map[string]any); ok {
			if ip, ok := m["ip"].(string); ok && ip != "" {
				out = append(out, ip)
			}
		}
	}
	return out
}

// addressesOf names the IPs the cluster gave the objects of s (keyed by
// key), and the pod IPs seen but not in s as those of a pod gone.
func addressesOf(s State, key map[*unstructured.Unstructured]string, podIPs map[string]bool) map[string]string {
	out := map[string]string{}
	for ip := range podIPs {
		out[ip] = "<IP of a pod gone>"
	}
	// Node names are left out: which node a pod lands on is the
	// scheduler's choice, run by run. A pod's own IP comes last, over its
	// node's (a pod of the host's network has its node's).
	pods := s.ByKind("Pod")
	for _, o := range pods {
		for _, ip := range podAddresses(o, "hostIP", "hostIPs") {
			out[ip] = "<IP of a node>"
		}
	}
	for _, o := range pods {
		for _, ip := range podAddresses(o, "podIP", "podIPs") {
			out[ip] = "<IP of " + key[o] + ">"
		}
	}
	for _, o := range s.ByKind("Service") {
		ips, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "clusterIPs")
		if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip != "" {
			ips = append(ips, ip)
		}
		for _, ip := range ips {
			if ip != "None" {
				out[ip] = "<cluster IP of " + key[o] + ">"
			}
		}
	}
	return out
}

// namesOf names a state's objects stably: a generated name (a
// generateName and the API server's 5 random characters; a StatefulSet's
// pods have a generateName too, but are named by ordinal) is its
// generateName and a star, a controller's name with a hash of a template
// (a ReplicaSet's, a ControllerRevision's: the template may hold this
// run's UIDs) its owner's name, a dash and a star.
func namesOf(s State, seen runsSeen) names {
	prefixes := seen.prefixes
	n := names{key: map[*unstructured.Unstructured]string{}, grouped: map[*unstructured.Unstructured]bool{}, stable: map[string]string{}, objects: map[string]bool{}}
	// Hashed names first: a generated name may start with one (a
	// ReplicaSet's pods).
	for _, o := range s.Objects {
		for _, ref := range o.GetOwnerReferences() {
			if hash, ok := strings.CutPrefix(o.GetName(), ref.Name+"-"); ok && ref.Controller != nil && *ref.Controller && madeUp(hash, 5, 12) {
				n.stable[o.GetName()], n.stable[hash] = ref.Name+"-*", "*"
				n.grouped[o] = true
			}
		}
	}
	var uids []string
	for _, o := range s.Objects {
		n.objects[o.GetName()] = true
		name, g := o.GetName(), o.GetGenerateName()
		if g != "" && strings.HasPrefix(name, g) && madeUp(name[len(g):], 5, 5) {
			prefix := g + "*"
			if st, ok := n.stable[strings.TrimSuffix(g, "-")]; ok {
				prefix = st + "-*"
			}
			n.stable[name] = prefix
			n.grouped[o] = true
		}
		n.key[o] = o.GetKind() + " " + gocmp.Or(n.stable[name], name)
		if uid := string(o.GetUID()); uid != "" {
			uids = append(uids, uid, "<uid of "+n.key[o]+">")
		}
	}
	n.uids = strings.NewReplacer(uids...)
	n.addresses = addressesOf(s, n.key, seen.podIPs)
	if len(prefixes) > 0 {
		quoted := make([]string, len(prefixes))
		for i, g := range prefixes {
			quoted[i] = regexp.QuoteMeta(g)
		}
		n.generated = regexp.MustCompile(`(^|[^a-z0-9.-])(` + strings.Join(quoted, "|") + `)[` + randomChars + `]{5}\b`)
	}
	return n
}

// held are the keys of the objects either state holds in deletion (named
// ones only: an object of a made-up name is one of a group), and owners
// the keys of their owners, up the chain, and of the claims such a pod
// mounts: their status cannot settle. mounted are the keys of the claims
// a pod of either state mounts.
func held(states []State, stateNames []names) (held, owners, mounted map[string]bool) {
	held, owners, mounted = map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, s := range states {
		for _, o := range s.Objects {
			if o.GetDeletionTimestamp() != nil && !stateNames[i].grouped[o] {
				held[stateNames[i].key[o]] = true
			}
		}
	}
	for i, s := range states {
		key := stateNames[i].key
		byName := s.byName()
		for _, o := range s.Objects {
			isHeld := o.GetDeletionTimestamp() != nil || held[key[o]]
			for _, claim := range claimsOf(o) {
				if c := byName["PersistentVolumeClaim "+claim]; c != nil {
					mounted[key[c]] = true
					// Whether a pod uses a claim is in its status.
					owners[key[c]] = owners[key[c]] || isHeld
				}
			}
			if !isHeld {
				continue
			}
			for owner := range ownerChain(o, byName) {
				owners[key[owner]] = true
			}
		}
	}
	return held, owners, mounted
}

// claimsOf are the claims a pod mounts.
func claimsOf(o *unstructured.Unstructured) []string {
	if o.GetKind() != "Pod" {
		return nil
	}
	var out []string
	volumes, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumes")
	for _, v := range volumes {
		if m, ok := v.(map[string]any); ok {
			if claim, _, _ := unstructured.NestedString(m, "persistentVolumeClaim", "claimName"); claim != "" {
				out = append(out, claim)
			}
		}
	}
	return out
}

// snapshot is a state made comparable with another run's: the compared
// objects, normalized, by key (a generateName's group sorted).
func (p *matchesReference) snapshot(s State, n names, held, statusHeld, mounted map[string]bool, used map[int]bool) map[string][]any {
	byName := s.byName()
	ns := ""
	for _, o := range s.Objects {
		ns = o.GetNamespace()
	}
	nodes := regexp.MustCompile(regexp.QuoteMeta(ns) + `-node-\d+`)
	norm := normalizer{namespace: ns, nodes: nodes, names: n}
	out := map[string][]any{}
	for _, o := range s.Objects {
		key := n.key[o]
		if held[key] || o.GetDeletionTimestamp() != nil || ignoredKinds[o.GetKind()] || !p.compared(o, byName) {
			continue
		}
		// A claim no pod of either run mounts is one a StatefulSet left
		// behind when it scaled down (its retention policy keeps it): that
		// it exists says how far the replicas once went, which user
		// changes faster than the controller looks leave to timing.
		if o.GetKind() == "PersistentVolumeClaim" && !mounted[key] {
			continue
		}
		obj := o.DeepCopy().Object
		if meta, ok := obj["metadata"].(map[string]any); ok {
			delete(meta, "name")
			delete(meta, "namespace")
			delete(meta, "creationTimestamp")
			if a, ok := meta["annotations"].(map[string]any); ok {
				for _, k := range ignoredAnnotations {
					delete(a, k)
				}
			}
		}
		if statusHeld[key] {
			delete(obj, "status")
		}
		for i, path := range p.ignore {
			if dropPath(obj, path) {
				used[i] = true
			}
		}
		out[key] = append(out[key], norm.value(obj))
	}
	for key, group := range out {
		if len(group) > 1 {
			slices.SortFunc(group, func(a, b any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			out[key] = group
		}
	}
	return out
}

// bothHave are the objects of two snapshots that both have, as many of
// each (a group of made-up names of one size).
func bothHave(a, b map[string][]any) (map[string][]any, map[string][]any) {
	keep := func(m, other map[string][]any) map[string][]any {
		return maps.Collect(func(yield func(string, []any) bool) {
			for key, group := range m {
				if len(other[key]) == len(group) && !yield(key, group) {
					return
				}
			}
		})
	}
	return keep(a, b), keep(b, a)
}

// compared: o is of a compared kind, owned (through owner references) by
// an object of one, or a claim.
func (p *matchesReference) compared(o *unstructured.Unstructured, byName map[string]*unstructured.Unstructured) bool {
	if len(p.opts.Kinds) == 0 || o.GetKind() == "PersistentVolumeClaim" {
		return true
	}
	if slices.Contains(p.opts.Kinds, o.GetKind()) {
		return true
	}
	for owner := range ownerChain(o, byName) {
		if slices.Contains(p.opts.Kinds, owner.GetKind()) {
			return true
		}
	}
	return false
}

// normalizer rewrites the values that name a run's own things.
type normalizer struct {
	namespace string
	nodes     *regexp.Regexp
	names     names
}

func (n normalizer) value(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if ignoredFields[k] {
				continue
			}
			// An empty map is as good as none (a label map emptied by an
			// ignored path).
			if x = n.value(x); x != nil && !isEmptyMap(x) {
				out[k] = x
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = n.value(x)
		}
		// Conditions come in the order they were first set, which may
		// differ from run to run; a list of named items keeps its order.
		if byType := conditionType(out); byType != nil {
			slices.SortStableFunc(out, func(a, b any) int { return strings.Compare(byType(a), byType(b)) })
		}
		return out
	case string:
		if st, ok := n.names.stable[v]; ok {
			return st
		}
		if i := strings.LastIndexByte(v, '-'); i > 0 && n.names.objects[v[:i]] && madeUp(v[i+1:], 5, 12) {
			return v[:i] + "-*"
		}
		if _, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return "<time>"
		}
		if strings.Count(v, ":") >= 2 {
			v = timestamps.ReplaceAllString(v, "<time>") // in a message
		}
		v = n.names.uids.Replace(v)
		v = n.names.replaceAddresses(v)
		if n.names.generated != nil {
			v = n.names.generated.ReplaceAllString(v, "$1$2*")
		}
		if n.namespace != "" && strings.Contains(v, n.namespace) {
			v = n.nodes.ReplaceAllString(v, "<node>")
			return strings.ReplaceAll(v, n.namespace, "<namespace>")
		}
		return v
	}
	return v
}

// timestamps match a time inside a longer value (a condition's message),
// as RFC 3339 writes it and as Go's time.Time.String does.
var timestamps = regexp.MustCompile(`\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:\d{2})|` +
	` \d{2}:\d{2}:\d{2}(?:\.\d+)? [+-]\d{4} (?:[A-Z]{2,5}|[+-]\d{4})(?: m=[+-]\d+\.\d+)?)`)

// digitsAndDots are where an IPv4 address may be in a longer value (an
// address and a port, a URL, a list): a run of digits and dots is one
// address or none.
var digitsAndDots = regexp.MustCompile(`[0-9.]{7,}`)

// replaceAddresses names the IPs of v that the run's cluster gave (see
// names.addresses); other IPs (a user's, in a spec) stay.
func (n names) replaceAddresses(v string) string {
	if len(n.addresses) == 0 {
		return v
	}
	if name, ok := n.addresses[v]; ok {
		return name // an IPv6 address, or any one alone
	}
	if strings.Count(v, ".") < 3 {
		return v
	}
	return digitsAndDots.ReplaceAllStringFunc(v, func(run string) string {
		ip := strings.Trim(run, ".") // a sentence's full stop
		if name, ok := n.addresses[ip]; ok {
			return strings.Replace(run, ip, name, 1)
		}
		return run
	})
}

// conditionType returns the type of a list's items when each is a map
// with a type and no name (conditions), else nil.
func conditionType(list []any) func(any) string {
	for _, item := range list {
		m, ok := item.(map[string]any)
		if _, typed := m["type"].(string); !ok || !typed || m["name"] != nil {
			return nil
		}
	}
	return func(item any) string { return item.(map[string]any)["type"].(string) }
}

func isEmptyMap(v any) bool {
	m, ok := v.(map[string]any)
	return ok && len(m) == 0
}

// dropPath deletes path from obj, through lists; it reports whether it
// found anything to delete.
func dropPath(v any, path []string) bool {
	switch v := v.(type) {
	case map[string]any:
		x, ok := v[path[0]]
		if !ok {
			return false
		}
		if len(path) == 1 {
			delete(v, path[0])
			return true
		}
		return dropPath(x, path[1:])
	case []any:
		found := false
		for _, x := range v {
			found = dropPath(x, path) || found
		}
		return found
	}
	return false
}

// splitField splits a field path in Write.Field's syntax: dots, and
// brackets around a key that may hold dots.
func splitField(path string) []string {
	var out []string
	for path != "" {
		switch {
		case path[0] == '[':
			end := strings.IndexByte(path, ']')
			if end < 0 {
				end = len(path)
			}
			out = append(out, path[1:end])
			path = strings.TrimPrefix(path[min(end+1, len(path)):], ".")
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			out = append(out, path[:end])
			path = strings.TrimPrefix(path[end:], ".")
		}
	}
	return out
}

// differences names what differs between two snapshots, deterministically:
// the objects missing or extra, and the fields of the others, at most
// eight.
func differences(want, got map[string][]any) string {
	var out []string
	for _, key := range slices.Sorted(unionKeys(want, got)) {
		w, g := want[key], got[key]
		switch {
		case len(g) == 0:
			out = append(out, key+" missing")
		case len(w) == 0:
			out = append(out, key+" not in the reference")
		case len(w) != len(g):
			out = append(out, fmt.Sprintf("%s: %d objects, the reference %d", key, len(g), len(w)))
		default:
			var paths []string
			for i := range w {
				fieldDifferences("", w[i], g[i], &paths)
			}
			slices.Sort(paths)
			for _, f := range slices.Compact(paths) {
				out = append(out, key+" "+f)
			}
		}
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("and %d more", len(out)-8))
	}
	return strings.Join(out, "; ")
}

// unionKeys yields every key of ms once.
func unionKeys[V any](ms ...map[string]V) iter.Seq[string] {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}

// fieldDifferences adds the paths where a and b differ: a list's items by
// their name or type where they have one, else the list as a whole.
func fieldDifferences(path string, a, b any, out *[]string) {
	if cmp.Equal(a, b) {
		return
	}
	join := func(k string) string {
		if strings.ContainsAny(k, ".[]") {
			return path + "[" + k + "]"
		}
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch a := a.(type) {
	case map[string]any:
		if b, ok := b.(map[string]any); ok {
			for _, k := range slices.Sorted(unionKeys(a, b)) {
				fieldDifferences(join(k), a[k], b[k], out)
			}
			return
		}
	case []any:
		if b, ok := b.([]any); ok {
			ka, kb := itemsByKey(a), itemsByKey(b)
			if ka != nil && kb != nil {
				for _, k := range slices.Sorted(unionKeys(ka, kb)) {
					fieldDifferences(path+"["+k+"]", ka[k], kb[k], out)
				}
				return
			}
		}
	}
	if path == "" {
		path = "(the object)"
	}
	*out = append(*out, path)
}

// itemsByKey keys a list's items by name=…, or type=… (conditions), or
// nil when they have neither.
func itemsByKey(list []any) map[string]any {
	out := map[string]any{}
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil
		}
		switch {
		case m["name"] != nil:
			out[fmt.Sprintf("name=%v", m["name"])] = m
		case m["type"] != nil:
			out[fmt.Sprintf("type=%v", m["type"])] = m
		default:
			return nil
		}
	}
	return out
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n… (cut)"
}
