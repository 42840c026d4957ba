package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
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
	nsField []byte
	// file is the log file read so far, up to offset: known by its
	// identity, not its name, as the API server rotates its log.
	file     os.FileInfo
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
	return &AuditReader{path: path, namespace: namespace, nsField: []byte(`"namespace":"` + namespace + `"`), file: st, offset: st.Size()}, nil
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
//
// The API server rotates its log (lumberjack's, at 100 MB when
// --audit-log-maxsize is not set: a search of a few hundred cases gets
// there): it renames the file to a backup beside it and starts a new one.
// The rest of the file read so far is then read from the backup, and the
// new file from its start; reading the new file from the old offset would
// lose every request of the cases under way.
func (a *AuditReader) Read() ([]properties.Request, error) {
	st, err := os.Stat(a.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return a.requests, nil // between a rotation's rename and its new file: read next time
	case err != nil:
		return a.requests, fmt.Errorf("reading the audit log: %w", err)
	}
	if !os.SameFile(st, a.file) {
		backup, err := a.backup()
		if err != nil {
			return a.requests, err
		}
		if err := a.readFrom(backup, a.file); err != nil {
			return a.requests, err
		}
		a.file, a.offset = st, 0
	}
	return a.requests, a.readFrom(a.path, a.file)
}

// backup is the name the file read so far was rotated to, as lumberjack
// names a backup: the log's name with a time before its extension.
func (a *AuditReader) backup() (string, error) {
	ext := filepath.Ext(a.path)
	names, err := filepath.Glob(strings.TrimSuffix(a.path, ext) + "-*" + ext)
	if err != nil {
		return "", fmt.Errorf("finding the audit log's backups: %w", err)
	}
	for _, name := range names {
		if st, err := os.Stat(name); err == nil && os.SameFile(st, a.file) {
			return name, nil
		}
	}
	return "", fmt.Errorf("reading the audit log: %s was rotated and the file read so far is not among its %d backups (was --audit-log-maxbackups set?)", a.path, len(names))
}

// readFrom adds the complete lines of the file at path from the offset,
// when it is still the file want (else it was rotated meanwhile, and the
// next read finds it).
func (a *AuditReader) readFrom(path string, want os.FileInfo) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading the audit log: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !os.SameFile(st, want) {
		return nil
	}
	if _, err := f.Seek(a.offset, io.SeekStart); err != nil {
		return fmt.Errorf("reading the audit log: %w", err)
	}
	r := bufio.NewReaderSize(f, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return nil // a partial last line is read next time
		}
		a.offset += int64(len(line))
		if req, ok := a.request(line); ok {
			a.requests = append(a.requests, req)
		}
	}
}

// request decodes line when it is a request of the namespace.
func (a *AuditReader) request(line []byte) (properties.Request, bool) {
	if !bytes.Contains(line, a.nsField) {
		return properties.Request{}, false
	}
	var ev auditEvent
	if json.Unmarshal(line, &ev) != nil || ev.ObjectRef == nil || ev.ObjectRef.Namespace != a.namespace {
		return properties.Request{}, false
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
	return req, true
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
