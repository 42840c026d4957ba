package lifecycle

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// evidenceLimit bounds each file saved beside a scenario (the controller's
// log, the namespace's events, the final objects): a controller that logs
// gigabytes leaves its last evidenceLimit bytes, and the file says so.
const evidenceLimit = 5 << 20

// controllerLog is a case's controller log: its last limit bytes, and how
// many came before them. A Manager or Func controller writes to it through
// its logr logger, a Process through its stdout and stderr; each instance
// of the case (after a restart) appends.
type controllerLog struct {
	mu      sync.Mutex
	limit   int
	buf     []byte // up to twice limit: cut back to limit when over
	dropped int64
}

func newControllerLog(limit int) *controllerLog { return &controllerLog{limit: limit} }

func (l *controllerLog) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, b...)
	if len(l.buf) > 2*l.limit {
		// Cut back once in a while, not on each write: a controller
		// that logs gigabytes costs a copy per limit bytes it writes.
		l.keepLast()
	}
	return len(b), nil
}

// keepLast drops all but the last limit bytes, from a line's start.
func (l *controllerLog) keepLast() {
	over := len(l.buf) - l.limit
	if over <= 0 {
		return
	}
	if i := bytes.IndexByte(l.buf[over:], '\n'); i >= 0 && over+i+1 < len(l.buf) {
		over += i + 1
	}
	l.dropped += int64(over)
	l.buf = append([]byte(nil), l.buf[over:]...)
}

// Bytes is the log, its first line saying so when its beginning was cut.
func (l *controllerLog) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.keepLast()
	if l.dropped == 0 {
		return bytes.Clone(l.buf)
	}
	head := fmt.Sprintf("--- kubeprop: the log was cut: its first %d bytes are left out, its last %d follow\n", l.dropped, len(l.buf))
	return append([]byte(head), l.buf...)
}

// tail is the log's last n lines.
func (l *controllerLog) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(l.buf[max(0, len(l.buf)-16<<10):]), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// logger writes the log's lines: the time since start (as the case's
// timeline stamps its lines), the logger's name, the message and values.
func (l *controllerLog) logger(start time.Time) logr.Logger {
	return funcr.New(func(prefix, args string) {
		if prefix != "" {
			args = prefix + ": " + args
		}
		_, _ = fmt.Fprintf(l, "%7.2fs  %s\n", time.Since(start).Seconds(), args)
	}, funcr.Options{})
}
