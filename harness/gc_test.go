package harness_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kubeprop/kubeprop/harness"
	"github.com/kubeprop/kubeprop/harness/cluster"
)

// TestGarbageCollectionAndNamespaceDeletion runs the real garbage collector
// and namespace controller.
func TestGarbageCollectionAndNamespaceDeletion(t *testing.T) {
	cs := clientset(t)
	ctx := context.Background()
	ns := namespace(t, cs)
	addNodes(t, 2)

	deploy(t, cs, ns, "web", 2)

	require.NoError(t, cs.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, "the ReplicaSet and pods garbage-collected", func(ctx context.Context) (bool, string, error) {
		rs, err := cs.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		_, pods, desc, err := readyPods(ctx, cs, ns, "app=web")
		return len(rs.Items) == 0 && len(pods) == 0, fmt.Sprintf("%d ReplicaSets, pods %s", len(rs.Items), desc), err
	})

	deploy(t, cs, ns, "again", 2)
	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	eventually(t, 60*time.Second, "the namespace deleted", func(ctx context.Context) (bool, string, error) {
		n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", err
		}
		return false, fmt.Sprintf("phase %s, conditions %v", n.Status.Phase, n.Status.Conditions), nil
	})
}

// TestAuditLogAttributesActors checks that every actor's writes reach the
// audit log under its own name.
func TestAuditLogAttributesActors(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	addNodes(t, 1)
	deploy(t, cs, ns, "web", 1)

	want := map[string]string{
		cluster.UserControllerManager: "create pods",
		cluster.UserScheduler:         "create pods/binding",
		harness.UserKubelet:           "patch pods/status",
	}
	eventually(t, 10*time.Second, "each actor's pod write in the audit log", func(context.Context) (bool, string, error) {
		seen, err := auditedWrites(env.Cluster().AuditLogPath(), ns)
		if err != nil {
			return false, "", err
		}
		for user, write := range want {
			if !seen[user][write] {
				return false, fmt.Sprintf("%v", seen), nil
			}
		}
		return true, "", nil
	})
}

// auditedWrites reads the audit log: user -> "verb resource[/subresource]"
// for requests in namespace ns.
func auditedWrites(path, ns string) (map[string]map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var ev struct {
			Verb string `json:"verb"`
			User struct {
				Username string `json:"username"`
			} `json:"user"`
			ObjectRef struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
			} `json:"objectRef"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			return nil, fmt.Errorf("audit log line %q: %w", sc.Text(), err)
		}
		if ev.ObjectRef.Namespace != ns {
			continue
		}
		what := ev.Verb + " " + ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			what += "/" + ev.ObjectRef.Subresource
		}
		if seen[ev.User.Username] == nil {
			seen[ev.User.Username] = map[string]bool{}
		}
		seen[ev.User.Username][what] = true
	}
	return seen, sc.Err()
}

// TestCRDsInstalled checks that EnvOptions.CRDDirectoryPaths are served,
// with their schema's defaults applied.
func TestCRDsInstalled(t *testing.T) {
	cs := clientset(t)
	ns := namespace(t, cs)
	dyn, err := dynamic.NewForConfig(env.Config())
	require.NoError(t, err)
	widgets := dyn.Resource(schema.GroupVersionResource{Group: "test.kubeprop.dev", Version: "v1", Resource: "widgets"}).Namespace(ns)
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.kubeprop.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{},
	}}
	created, err := widgets.Create(context.Background(), w, metav1.CreateOptions{})
	require.NoError(t, err)
	replicas, found, err := unstructured.NestedInt64(created.Object, "spec", "replicas")
	require.NoError(t, err)
	require.True(t, found, "the schema default was not applied: %v", created.Object)
	require.Equal(t, int64(1), replicas)
}
