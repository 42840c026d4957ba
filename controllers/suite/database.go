package suite

import (
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"pgregory.net/rapid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kubeprop/kubeprop/controllers/database"
	"github.com/kubeprop/kubeprop/faults"
	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/properties"
)

// DatabaseSpec is the conformance check of a Database operator
// (controllers/database): Database db, three members of 1Gi each, under
// the default faults, storage changes and volume growth, converges (the
// StatefulSet, its pods and claims, the Service, the ConfigMap and the
// status as the spec asks), never deletes a claim a live Database wants,
// backs off, does not fight and goes quiet. newReconciler gives a fresh
// reconciler for every start of the operator.
func DatabaseSpec(newReconciler func() *database.Reconciler) harness.Spec {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err) // static registrations: cannot fail
	}
	if err := database.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return harness.Spec{
		Controller: harness.Manager(func(mgr manager.Manager, opts controller.Options) error {
			return newReconciler().SetupWithManager(mgr, opts)
		}),
		Scheme:   scheme,
		Fixtures: databaseFixtures,
		Watch: []schema.GroupVersionKind{
			appsv1.SchemeGroupVersion.WithKind("StatefulSet"), appsv1.SchemeGroupVersion.WithKind("ControllerRevision"),
			corev1.SchemeGroupVersion.WithKind("Service"), corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		},
		Faults: append(faults.Default(), StorageChange(), faults.VolumeGrowth()),
		Properties: []properties.Property{
			properties.Converges("converges", DatabaseConverged, properties.ConvergeOptions{Within: 30 * time.Second}),
			properties.Func("claims-kept", ClaimsKept),
			properties.BoundedBackoff(properties.BackoffOptions{}),
			properties.NoFightLoop(properties.FightOptions{}),
			properties.Quiescent(properties.QuiesceOptions{Window: 2 * time.Second, Within: 30 * time.Second}),
			properties.NoPanics(),
		},
		// Claims bind and members start before the first step; a growth
		// re-creates the StatefulSet, which takes a few settles of quiet.
		Setup: 30 * time.Second, SettleCap: 5 * time.Second,
	}
}

// StorageChange is the user's change of a Database's volume size: a merge
// patch of spec.storage to 1-4 Gi (1Gi is the fixture's; less than the
// size applied is refused).
func StorageChange() faults.Fault {
	return faults.UserChange("StorageChange", rapid.Custom(func(t *rapid.T) map[string]any {
		gi := rapid.IntRange(1, 4).Draw(t, "gi")
		return map[string]any{"spec": map[string]any{"storage": fmt.Sprintf("%dGi", gi)}}
	}))
}

func databaseFixtures(namespace string) []client.Object {
	return []client.Object{&database.Database{
		TypeMeta:   metav1.TypeMeta{APIVersion: database.GroupVersion.String(), Kind: "Database"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "db"},
		Spec:       database.DatabaseSpec{Replicas: ptr.To[int32](3), Storage: "1Gi", Image: "registry.example/db:1"},
	}}
}

func databases(s properties.State) []*database.Database {
	var out []*database.Database
	for _, u := range s.ByKind("Database") {
		if db, err := properties.As[database.Database](u); err == nil {
			out = append(out, db)
		}
	}
	return out
}

// DatabaseConverged holds when every Database not being deleted has what
// it asks for: its StatefulSet, controlled by it, of its replicas and a
// claim template of at least its storage; for each ordinal below the
// replicas a running, ready pod (or a pod left Terminating on a lost node,
// which a StatefulSet never replaces: see StatefulSetSpec) and a bound
// claim whose request and capacity are at least its storage; no active pod
// beyond the replicas; its Service, and its ConfigMap listing the members;
// and a status of its generation that counts the ready members.
func DatabaseConverged(s properties.State) error {
	for _, db := range databases(s) {
		if db.DeletionTimestamp != nil {
			continue
		}
		want, err := db.StorageSize()
		if err != nil {
			return err
		}
		u := s.Get("StatefulSet", db.Name)
		if u == nil {
			return fmt.Errorf("Database %s has no StatefulSet", db.Name)
		}
		set, err := properties.As[appsv1.StatefulSet](u)
		if err != nil {
			return err
		}
		replicas := int(db.Replicas())
		switch asked, ok := database.TemplateStorage(set); {
		case !metav1.IsControlledBy(set, db):
			return fmt.Errorf("StatefulSet %s is not controlled by Database %s", set.Name, db.Name)
		case int(ptr.Deref(set.Spec.Replicas, 1)) != replicas:
			return fmt.Errorf("StatefulSet %s asks for %d replicas, Database %s for %d", set.Name, ptr.Deref(set.Spec.Replicas, 1), db.Name, replicas)
		case !ok || asked.Cmp(want) < 0:
			return fmt.Errorf("StatefulSet %s's claim template asks for %s, Database %s for %s", set.Name, asked.String(), db.Name, want.String())
		}
		pods := map[int]*corev1.Pod{}
		for _, p := range s.ByKind("Pod") {
			pod, err := properties.As[corev1.Pod](p)
			if err != nil {
				return err
			}
			if i, ok := ordinal(set.Name, pod.Name); ok {
				pods[i] = pod
			}
		}
		ready, blocked := 0, blockedByEarlier(set, pods)
		for i := range replicas {
			switch pod := pods[i]; {
			case pod == nil && blocked:
				continue
			case pod == nil:
				return fmt.Errorf("Database %s: no pod of ordinal %d", db.Name, i)
			case leftTerminating(pod):
			case pod.DeletionTimestamp != nil:
				return fmt.Errorf("Database %s: pod of ordinal %d is terminating", db.Name, i)
			case pod.Status.Phase != corev1.PodRunning || !podReady(pod):
				return fmt.Errorf("Database %s: pod of ordinal %d is %s and not ready", db.Name, i, pod.Status.Phase)
			default:
				ready++
			}
			if err := claimHolds(s, fmt.Sprintf("%s-%s-%d", database.ClaimTemplate, db.Name, i), want); err != nil {
				return fmt.Errorf("Database %s: ordinal %d: %w", db.Name, i, err)
			}
		}
		for i, pod := range pods {
			if i >= replicas && activePod(pod) {
				return fmt.Errorf("Database %s: pod of ordinal %d is active beyond %d replicas", db.Name, i, replicas)
			}
		}
		if svc := s.Get("Service", db.Name); svc == nil || !controlledBy(svc.GetOwnerReferences(), db.UID) {
			return fmt.Errorf("Database %s has no Service of its own", db.Name)
		}
		cm := s.Get("ConfigMap", database.ConfigMapName(db.Name))
		if cm == nil || !controlledBy(cm.GetOwnerReferences(), db.UID) {
			return fmt.Errorf("Database %s has no ConfigMap of its own", db.Name)
		}
		if members, _, _ := unstructured.NestedString(cm.Object, "data", "members"); members != database.Members(db) {
			return fmt.Errorf("ConfigMap %s lists members %q, not those of %d replicas", cm.GetName(), members, replicas)
		}
		switch {
		case db.Status.ObservedGeneration != db.Generation:
			return fmt.Errorf("Database %s status is of an older generation", db.Name)
		case int(db.Status.ReadyReplicas) != ready:
			return fmt.Errorf("Database %s status reports %d ready members of %d", db.Name, db.Status.ReadyReplicas, ready)
		}
	}
	return nil
}

// claimHolds: the claim is bound, and asks for and has at least want.
func claimHolds(s properties.State, name string, want resource.Quantity) error {
	u := s.Get("PersistentVolumeClaim", name)
	if u == nil {
		return fmt.Errorf("no claim %s", name)
	}
	claim, err := properties.As[corev1.PersistentVolumeClaim](u)
	if err != nil {
		return err
	}
	asked, got := claim.Spec.Resources.Requests[corev1.ResourceStorage], claim.Status.Capacity[corev1.ResourceStorage]
	switch {
	case claim.Status.Phase != corev1.ClaimBound:
		return fmt.Errorf("claim %s is %s", name, claim.Status.Phase)
	case asked.Cmp(want) < 0:
		return fmt.Errorf("claim %s asks for %s of the %s wanted", name, asked.String(), want.String())
	case got.Cmp(want) < 0:
		return fmt.Errorf("claim %s has %s of the %s wanted", name, got.String(), want.String())
	}
	return nil
}

func controlledBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, ref := range refs {
		if ref.Controller != nil && *ref.Controller && ref.UID == uid {
			return true
		}
	}
	return false
}

// ClaimsKept fails when a claim was deleted that a live Database wanted
// for its whole life: in every observed state from the claim's first
// appearance to its deletion mark (metadata.deletionTimestamp, or its
// disappearance when no mark was seen), a Database of the claim's name
// (data-<name>-<ordinal>) was there, not being deleted, with more
// replicas than the claim's ordinal. Nothing else in the suite's faults
// deletes a claim: such a deletion is the operator's, which must keep a
// member's data while the member is wanted. Claims are known by UID: one
// deleted and created again under its name is two claims.
func ClaimsKept(tr *properties.Trace) error {
	type claim struct {
		name   string
		wanted bool // so far
		done   bool // marked for deletion or gone
	}
	claims := map[types.UID]*claim{}
	var order []types.UID
	var lost []string
	var evidence properties.Evidence
	lose := func(c *claim, at time.Time, how string) {
		lost = append(lost, c.name)
		evidence.Marks = append(evidence.Marks, properties.Mark{At: at, Label: fmt.Sprintf("PersistentVolumeClaim %s %s while a live Database wanted it", c.name, how)})
	}
	for _, s := range tr.States {
		present := map[types.UID]bool{}
		for _, u := range s.ByKind("PersistentVolumeClaim") {
			uid := u.GetUID()
			present[uid] = true
			c := claims[uid]
			if c == nil {
				c = &claim{name: u.GetName(), wanted: true}
				claims[uid] = c
				order = append(order, uid)
			}
			if c.done {
				continue
			}
			c.wanted = c.wanted && claimWanted(s, u.GetName())
			if u.GetDeletionTimestamp() != nil {
				c.done = true
				if c.wanted {
					lose(c, s.At, "marked for deletion")
				}
			}
		}
		for _, uid := range order {
			if c := claims[uid]; !c.done && !present[uid] {
				c.done = true
				if c.wanted {
					lose(c, s.At, "gone")
				}
			}
		}
	}
	if len(lost) > 0 {
		slices.Sort(lost)
		return properties.WithEvidence(fmt.Errorf("claims deleted while a live Database wanted them: %s", strings.Join(slices.Compact(lost), ", ")), evidence)
	}
	return nil
}

// claimWanted reports whether a live Database in s wants the claim of
// that name: data-<name>-<ordinal> with ordinal below its replicas.
func claimWanted(s properties.State, claim string) bool {
	rest, ok := strings.CutPrefix(claim, database.ClaimTemplate+"-")
	if !ok {
		return false
	}
	cut := strings.LastIndex(rest, "-")
	if cut < 0 {
		return false
	}
	i, ok := ordinal(rest[:cut], rest)
	if !ok {
		return false
	}
	u := s.Get("Database", rest[:cut])
	if u == nil || u.GetDeletionTimestamp() != nil {
		return false
	}
	db, err := properties.As[database.Database](u)
	return err == nil && i < int(db.Replicas())
}
