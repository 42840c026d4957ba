package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/kubeprop/kubeprop/properties"
)

// AuditReader reads a case's requests from the API server's audit log,
// from where the log stood when it was made.
type AuditReader struct {
	path      string
	namespace string
	// nsField is how the namespace shows in a line of the namespace's
	// requests: every case reads every line of the shared log, and most
	// are other cases'; only these are decoded.
	nsField  []byte
	offset   int64
	requests []properties.Request
}

// NewAuditReader reads the requests of namespace from the audit log at
// path (one JSON event a line) that are written from now on.
func NewAuditReader(path, namespace string) (*AuditReader, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	return &AuditReader{path: path, namespace: namespace, nsField: []byte(`"namespace":"` + namespace + `"`), offset: st.Size()}, nil
}

type auditEvent struct {
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	UserAgent  string    `json:"userAgent"`
	Received   time.Time `json:"requestReceivedTimestamp"`
	User       struct {
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

// Read adds the complete lines written since the last read and returns
// every request of the namespace so far.
func (a *AuditReader) Read() ([]properties.Request, error) {
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
		if !bytes.Contains(line, a.nsField) {
			continue
		}
		var ev auditEvent
		if json.Unmarshal(line, &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != a.namespace {
			continue
		}
		req := properties.Request{
			At: ev.Received, User: ev.User.Username, UserAgent: ev.UserAgent, Verb: ev.Verb,
			Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name,
			FieldManager: fieldManager(ev.RequestURI, ev.UserAgent),
		}
		if ev.ResponseStatus != nil {
			req.Code = ev.ResponseStatus.Code
		}
		a.requests = append(a.requests, req)
	}
	return a.requests, nil
}

// fieldManager names the field manager a request wrote as, as the API
// server does (prefixFromUserAgent in k8s.io/apiserver's handlers): the
// fieldManager parameter, else the user agent up to its first slash,
// printable characters only, at most 128 bytes.
func fieldManager(requestURI, userAgent string) string {
	if u, err := url.ParseRequestURI(requestURI); err == nil {
		if m := u.Query().Get("fieldManager"); m != "" {
			return m
		}
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b strings.Builder
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > 128 {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
