package storage_test

import (
	"context"
	"log"

	"k8s.io/client-go/rest"

	"github.com/kubeprop/kubeprop/harness/storage"
)

// A harness.Env starts the Provisioner itself; on a cluster of one's own,
// give it an administrator's connection. Claims of storage.ClassName (the
// default class) then get volumes.
func Example() {
	var admin *rest.Config // e.g. cluster.Cluster.Config()
	p, err := storage.Start(context.Background(), admin, storage.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Stop()
}
