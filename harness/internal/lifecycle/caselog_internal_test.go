package lifecycle

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// TestControllerLogKeepsItsLastBytes: a controller that logs far more than
// the bound leaves its last lines, whole, after a first line that says how
// much was cut; one under the bound is kept as written.
func TestControllerLogKeepsItsLastBytes(t *testing.T) {
	l := newControllerLog(1 << 20)
	logger := l.logger(time.Now())
	logger.Info("reconciling", "podset", "web")
	require.Contains(t, string(l.Bytes()), `"msg"="reconciling" "podset"="web"`)
	require.NotContains(t, string(l.Bytes()), "cut")

	line := strings.Repeat("x", 4000)
	for i := range 16 << 10 { // 64 MB
		fmt.Fprintf(l, "%d %s\n", i, line)
	}
	got := l.Bytes()
	head, rest, _ := bytes.Cut(got, []byte("\n"))
	require.Contains(t, string(head), "--- kubeprop: the log was cut: its first ")
	require.LessOrEqual(t, len(rest), 1<<20)
	require.Greater(t, len(rest), 1<<20-5000, "a line's length short of the bound at most")
	first, _, _ := bytes.Cut(rest, []byte("\n"))
	require.Regexp(t, "^[0-9]+ x+$", string(first), "the log starts at a whole line")
	require.True(t, bytes.HasSuffix(first, []byte(" "+line)), "the whole line")
	require.True(t, bytes.HasSuffix(rest, []byte(fmt.Sprintf("%d %s\n", 16<<10-1, line))), "the last line written is the last")
}

// TestBoundedList: a list over the bound leaves out its first items and
// says how many; the rest is a v1 List kubectl reads.
func TestBoundedList(t *testing.T) {
	var events []any
	for i := range 100 {
		events = append(events, corev1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("e%d", i)}, Reason: "Scheduled"})
	}
	whole, err := boundedList(events, "events, oldest first", 1<<20)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(whole), "# kubeprop: the events, oldest first (100)\n"), string(whole[:80]))
	cut, err := boundedList(events, "events, oldest first", len(whole)/2)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(cut), "# kubeprop: cut: the first "), string(cut[:80]))
	require.LessOrEqual(t, len(cut), len(whole)/2+200)
	var list struct {
		Kind  string         `json:"kind"`
		Items []corev1.Event `json:"items"`
	}
	require.NoError(t, yaml.Unmarshal(cut, &list))
	require.Equal(t, "List", list.Kind)
	require.NotEmpty(t, list.Items)
	require.Less(t, len(list.Items), 100)
	require.Equal(t, "e99", list.Items[len(list.Items)-1].Name, "the newest kept")
	none, err := boundedList(events, "events, oldest first", 10)
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(none, &list))
	require.Empty(t, list.Items)
}

// TestControllerLogTail: the last lines, for the errors about a process.
func TestControllerLogTail(t *testing.T) {
	l := newControllerLog(1 << 20)
	for i := range 30 {
		fmt.Fprintf(l, "line %d\n", i)
	}
	require.Equal(t, "line 27\nline 28\nline 29", l.tail(3))
	require.Equal(t, 30, strings.Count(l.tail(40), "line "), "fewer lines than asked: all")
}
