package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/kubeprop/kubeprop/properties"
)

// auditReader reads a case's requests from the API server's audit log,
// from where the log stood when the case began.
type auditReader struct {
	path      string
	namespace string
	offset    int64
	requests  []properties.Request
}

func newAuditReader(path, namespace string) (*auditReader, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return &auditReader{path: path, namespace: namespace, offset: st.Size()}, nil
}

type auditEvent struct {
	Verb      string    `json:"verb"`
	UserAgent string    `json:"userAgent"`
	Received  time.Time `json:"requestReceivedTimestamp"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
}

// read adds the complete lines written since the last read and returns
// every request of the namespace so far.
func (a *auditReader) read() ([]properties.Request, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return a.requests, fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return a.requests, fmt.Errorf("reading the audit log: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			break // a partial last line is read next time
		}
		a.offset += int64(len(line))
		var ev auditEvent
		if json.Unmarshal(line, &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != a.namespace {
			continue
		}
		req := properties.Request{
			At: ev.Received, User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb,
			Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
		}
		if ev.ResponseStatus != nil {
			req.Code = ev.ResponseStatus.Code
		}
		a.requests = append(a.requests, req)
	}
	return a.requests, nil
}
