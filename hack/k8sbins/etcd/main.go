// Command etcd is etcd's own entry point (etcdmain.Main), built from the
// go.etcd.io/etcd/server/v3 module at the version pinned in go.mod. It lives
// in a module of its own because Kubernetes pins a newer etcd server in its
// build graph, and the hollow cluster runs etcd v3.6.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
