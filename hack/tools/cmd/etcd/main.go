// Command etcd is the etcd server, built from the Go module proxy for berth's tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
