// Command kube-apiserver is the upstream Kubernetes API server, built from
// k8s.io/kubernetes at the version go.mod names. kplane-bench's compare
// builds it and starts it on a real etcd (tools/etcd) as its "kube" mode,
// so that kplane is measured against kube-apiserver on the same machine,
// in the same run, under the same load. It lives in its own module so that
// no Kubernetes server code enters kplane's dependencies: nothing in
// kplane imports it.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
