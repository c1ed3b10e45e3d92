// Package apiserver is kplane's HTTP face: the Kubernetes REST API over
// the registry. It routes /api and /apis paths to resources, parses the
// query parameters of every verb (get, list, watch, create, update,
// delete, deletecollection, and the status subresource), negotiates the
// response form (JSON objects, Tables for kubectl get, metadata-only
// objects), streams watches (one JSON event per line, each event encoded
// once for all its watchers), and serves discovery (legacy and the
// aggregated apidiscovery.k8s.io/v2 form), /version, the health
// endpoints (kube-apiserver's named checks, with the caller's own such as
// etcd's; health.go), /metrics (the requests', the process's and the Go runtime's
// figures, in the Prometheus text format), and OpenAPI documents that tell kubectl
// which query parameters the server supports.
//
// Every error reaches the client as a metav1.Status with kube-apiserver's
// code, reason and message. Bodies are limited to 3 MiB (413 beyond).
//
// Authentication is by client certificate (the TLS layer verifies it
// against kplane's CA) or, without one, by a bearer token that
// Config.Tokens accepts (a service account token). A request with neither
// is system:anonymous: with an authorizer it is authorized as any other,
// as upstream's; without one this package refuses it (401) except on
// /version and the three health endpoints themselves (not their single
// checks, which say why they fail); with Config.RefuseAnonymous
// (--anonymous-auth=false) it is refused everywhere. A request with a
// token that is not valid is always refused. A request's
// Impersonate-* headers then make it run as another user, if its sender
// may impersonate them (impersonate.go). Authorization is
// Config.Authorizer's (the RBAC authorizer with --authorization-mode
// RBAC): it decides on the attributes read off each request's path,
// method and query, before routing, and a refusal is upstream's 403
// (authorize.go). Without one an authenticated client is an admin.
//
// Request bodies may be JSON, YAML, or (for the built-in kinds and
// DeleteOptions) the Kubernetes protobuf wire format. Responses are JSON,
// YAML, Tables and PartialObjectMetadata when asked for, and protobuf for
// built-in kinds when the client prefers it. JSON, protobuf, Tables and
// metadata are written from the stored records (the stored JSON, the
// protobuf message transcoded from it by package transcode or kept with
// the record, the stored metadata), lists in pieces through pooled
// buffers, gzip-compressed from 128 KiB for remote clients that take
// gzip; only YAML and objects that must be presented in another version
// go through a decode. A request that asks for it (?pretty, or curl, Wget
// or a browser) gets its JSON indented, as upstream's pretty serializer
// writes it (pretty.go); watches never.
//
// PATCH takes the four upstream patch media types (strategic merge only
// for built-in kinds) and the PatchOptions query; the registry applies
// them.
//
// Watches stream JSON, or protobuf to clients that negotiate it (watch.go).
//
// Not offered: CBOR.
package apiserver
