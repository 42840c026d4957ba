package cluster

import "path/filepath"

// auditPolicy records every write at Metadata level: who did what to which
// object, when, with what result. Reads are left out to keep the log small,
// and so are node Lease renewals, which are most of a hollow cluster's
// writes and say nothing about a controller. An exec is kept whatever its
// verb (a WebSocket client's is a get), once, when it ends.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/exec"]
  omitStages: ["ResponseStarted"]
- level: None
  verbs: ["get", "list", "watch"]
- level: None
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  namespaces: ["kube-node-lease"]
- level: Metadata
`

func (c *Cluster) auditPolicyPath() string { return filepath.Join(c.dir, "audit-policy.yaml") }

// AuditLogPath is the API server's audit log, one JSON event a line.
func (c *Cluster) AuditLogPath() string { return filepath.Join(c.dir, "audit.log") }
