package cluster

import (
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// filterCall posts body to the extender's filter verb, as kube-scheduler
// does, and returns the answer's JSON object.
func filterCall(t *testing.T, e *extender, method, body string) map[string]any {
	t.Helper()
	req, err := http.NewRequest(method, strings.TrimRight(e.urlPrefix(), "/")+"/"+extenderVerb, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	// The scheduler fails the call on any other status.
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// A call as kube-scheduler v1.37 encodes extenderv1.ExtenderArgs with
// nodeCacheCapable: untagged fields, so Go names, and Nodes null.
const schedulerCall = `{"Pod":{"metadata":{"name":"web-1","namespace":"kp-1"},"spec":{"containers":[{"name":"app","image":"pause"}]}},` +
	`"Nodes":null,"NodeNames":["node-a","kp-1-node-0","kp-2-node-0","kp-1-node-1"]}`

func TestExtenderFilter(t *testing.T) {
	var gotNamespace string
	var gotNodes []string
	e, err := startExtender(func(ns string, nodes []string) []string {
		gotNamespace, gotNodes = ns, nodes
		var keep []string
		for _, n := range nodes {
			if strings.HasPrefix(n, ns+"-node-") {
				keep = append(keep, n)
			}
		}
		// Not a candidate: must not reach the scheduler.
		return append(keep, "kp-1-node-9")
	}, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.stop()) }()
	require.True(t, strings.HasPrefix(e.urlPrefix(), "http://127.0.0.1:"), e.urlPrefix())

	out := filterCall(t, e, http.MethodPost, schedulerCall)
	require.Equal(t, "kp-1", gotNamespace)
	require.Equal(t, []string{"node-a", "kp-1-node-0", "kp-2-node-0", "kp-1-node-1"}, gotNodes)
	// The field names extenderv1.ExtenderFilterResult decodes.
	require.Equal(t, []any{"kp-1-node-0", "kp-1-node-1"}, out["NodeNames"])
	msg := "node(s) not for pods of namespace kp-1 (kubeprop NodeFilter)"
	require.Equal(t, map[string]any{"node-a": msg, "kp-2-node-0": msg}, out["FailedAndUnresolvableNodes"])
	require.NotContains(t, out, "FailedNodes", "no node may be freed by preemption")
	require.NotContains(t, out, "Error")
}

func TestExtenderFilterKeepsNone(t *testing.T) {
	e, err := startExtender(func(string, []string) []string { return nil }, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.stop()) }()
	out := filterCall(t, e, http.MethodPost, schedulerCall)
	// An empty list, not null: the scheduler reads both as none kept,
	// but the empty list says so.
	require.Equal(t, []any{}, out["NodeNames"])
	require.Len(t, out["FailedAndUnresolvableNodes"], 4)
}

func TestExtenderNilFilterKeepsEveryNode(t *testing.T) {
	e, err := startExtender(nil, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.stop()) }()
	out := filterCall(t, e, http.MethodPost, schedulerCall)
	require.Equal(t, []any{"node-a", "kp-1-node-0", "kp-2-node-0", "kp-1-node-1"}, out["NodeNames"])
	require.NotContains(t, out, "FailedAndUnresolvableNodes")
}

// Every bad call gets an answer with Error set, at once: the scheduler
// must not wait out its timeout.
func TestExtenderBadCalls(t *testing.T) {
	e, err := startExtender(func(ns string, nodes []string) []string {
		if ns == "boom" {
			panic("a bug in the filter")
		}
		return nodes
	}, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.stop()) }()
	for _, c := range []struct {
		name, method, body, want string
	}{
		{"not JSON", http.MethodPost, `{"Pod":`, "decoding the filter call"},
		{"no pod", http.MethodPost, `{"NodeNames":["a"]}`, "names no pod"},
		{"no node names", http.MethodPost, `{"Pod":{"metadata":{"namespace":"x"}},"Nodes":{"items":[]}}`, "nodeCacheCapable"},
		{"not a POST", http.MethodGet, ``, "is a POST"},
		{"filter panics", http.MethodPost, `{"Pod":{"metadata":{"namespace":"boom"}},"NodeNames":["a"]}`, "panicked: a bug in the filter"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			out := filterCall(t, e, c.method, c.body)
			require.Contains(t, out["Error"], c.want)
			require.Nil(t, out["NodeNames"])
			require.Less(t, time.Since(start), 5*time.Second)
		})
	}
	// The server still serves after them.
	out := filterCall(t, e, http.MethodPost, schedulerCall)
	require.Len(t, out["NodeNames"], 4)
}

func TestExtenderStopped(t *testing.T) {
	e, err := startExtender(nil, nil)
	require.NoError(t, err)
	require.NoError(t, e.stop())
	_, err = http.Post(e.urlPrefix()+extenderVerb, "application/json", strings.NewReader(schedulerCall))
	require.Error(t, err, "the port is closed after stop")
}

// The scheduler's configuration names the extender and carries what its
// flags carried before: with --config, it ignores --kubeconfig,
// --kube-api-qps and --kube-api-burst.
func TestSchedulerConfig(t *testing.T) {
	e, err := startExtender(nil, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, e.stop()) }()
	c := &Cluster{dir: t.TempDir(), ext: e}
	path, err := c.writeSchedulerConfig("/x/kube-scheduler.kubeconfig")
	require.NoError(t, err)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var cfg struct {
		APIVersion       string `json:"apiVersion"`
		Kind             string `json:"kind"`
		ClientConnection struct {
			Kubeconfig string  `json:"kubeconfig"`
			QPS        float64 `json:"qps"`
			Burst      int     `json:"burst"`
		} `json:"clientConnection"`
		LeaderElection struct {
			LeaderElect *bool `json:"leaderElect"`
		} `json:"leaderElection"`
		Extenders []map[string]any `json:"extenders"`
	}
	require.NoError(t, json.Unmarshal(b, &cfg))
	require.Equal(t, "kubescheduler.config.k8s.io/v1", cfg.APIVersion)
	require.Equal(t, "KubeSchedulerConfiguration", cfg.Kind)
	require.Equal(t, "/x/kube-scheduler.kubeconfig", cfg.ClientConnection.Kubeconfig)
	require.Equal(t, float64(clientQPS), cfg.ClientConnection.QPS)
	require.Equal(t, clientBurst, cfg.ClientConnection.Burst)
	require.NotNil(t, cfg.LeaderElection.LeaderElect)
	require.False(t, *cfg.LeaderElection.LeaderElect)
	require.Len(t, cfg.Extenders, 1)
	x := cfg.Extenders[0]
	require.Equal(t, e.urlPrefix(), x["urlPrefix"])
	require.Equal(t, "filter", x["filterVerb"])
	require.Equal(t, true, x["nodeCacheCapable"])
	require.Equal(t, false, x["ignorable"])
}

// TestExtenderPrioritize: the picked node scores 10, the others 0, under
// the names extenderv1.HostPriorityList decodes; a call it cannot read
// scores none.
func TestExtenderPrioritize(t *testing.T) {
	e, err := startExtender(nil, func(pod *corev1.Pod, nodes []string) string { return nodes[len(nodes)-1] })
	require.NoError(t, err)
	defer func() { require.NoError(t, e.stop()) }()
	call := func(body string) []map[string]any {
		resp, err := http.Post(e.urlPrefix()+extenderPrioritizeVerb, "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var out []map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out
	}
	require.Equal(t, []map[string]any{{"Host": "kp-1-node-0", "Score": float64(0)}, {"Host": "kp-1-node-1", "Score": float64(10)}},
		call(`{"Pod": {"metadata": {"namespace": "kp-1", "name": "p"}}, "NodeNames": ["kp-1-node-0", "kp-1-node-1"]}`))
	require.Empty(t, call(`{"Pod":`))
}
