package apiserver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kplane-dev/kplane/internal/registry"
)

// The OpenAPI documents list each served group version's operations with
// the kind they act on and their query parameters. That is what kubectl
// reads to learn that the server validates fields itself
// (?fieldValidation), so it sends objects as they are and lets the server
// judge them. Schemas of the kinds' fields are not published yet.

func gvPath(g *servedGroup, v string) string {
	if g.name == "" {
		return "api/" + v
	}
	return "apis/" + g.name + "/" + v
}

// openAPIV3Root lists the group versions, each at a URL with a hash of its
// document, as upstream does so clients can cache them.
func (s *Server) openAPIV3Root(w http.ResponseWriter, r *http.Request) {
	paths := map[string]any{}
	for _, g := range s.servedGroups() {
		for _, v := range g.versions {
			doc, _ := json.Marshal(s.openAPIV3Doc(g, v))
			sum := sha256.Sum256(doc)
			p := gvPath(g, v)
			paths[p] = map[string]string{"serverRelativeURL": "/openapi/v3/" + p + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:]))}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"paths": paths})
}

func (s *Server) openAPIV3(w http.ResponseWriter, r *http.Request) {
	want := strings.TrimPrefix(r.URL.Path, "/openapi/v3/")
	for _, g := range s.servedGroups() {
		for _, v := range g.versions {
			if gvPath(g, v) == want {
				writeJSON(w, http.StatusOK, s.openAPIV3Doc(g, v))
				return
			}
		}
	}
	writeError(w, apierrors.NewNotFound(schema.GroupResource{}, ""))
}

func queryParam(name, typ string) map[string]any {
	return map[string]any{"name": name, "in": "query", "schema": map[string]any{"type": typ, "uniqueItems": true}}
}

// openAPIV3Doc is the document of one group version.
func (s *Server) openAPIV3Doc(g *servedGroup, v string) map[string]any {
	paths := map[string]any{}
	for _, k := range g.byVer[v] {
		gvk := map[string]string{"group": k.Group, "version": v, "kind": k.Kind}
		op := func(action string, params ...map[string]any) map[string]any {
			ps := []any{}
			for _, p := range params {
				ps = append(ps, p)
			}
			return map[string]any{
				"operationId": action + k.Kind, "x-kubernetes-action": action,
				"x-kubernetes-group-version-kind": gvk, "parameters": ps,
				"responses": map[string]any{"200": map[string]any{"description": "OK"}},
			}
		}
		write := []map[string]any{queryParam("dryRun", "string"), queryParam("fieldManager", "string"), queryParam("fieldValidation", "string")}
		base := "/" + gvPath(g, v) + "/"
		if k.Namespaced {
			base += "namespaces/{namespace}/"
		}
		paths[base+k.Resource] = map[string]any{
			"get":  op("list", queryParam("labelSelector", "string"), queryParam("fieldSelector", "string"), queryParam("resourceVersion", "string"), queryParam("limit", "integer"), queryParam("continue", "string"), queryParam("watch", "boolean")),
			"post": op("post", write...),
		}
		paths[base+k.Resource+"/{name}"] = map[string]any{
			"get":    op("get"),
			"put":    op("put", write...),
			"patch":  op("patch", append(write, queryParam("force", "boolean"))...),
			"delete": op("delete", queryParam("dryRun", "string")),
		}
	}
	return map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]any{"title": "Kubernetes", "version": s.Info().GitVersion},
		"paths":      paths,
		"components": map[string]any{"schemas": map[string]any{}},
	}
}

// openAPIV2 is a Swagger 2.0 document with no definitions: enough for
// clients that only check it parses.
func (s *Server) openAPIV2(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"swagger":     "2.0",
		"info":        map[string]any{"title": "Kubernetes", "version": s.Info().GitVersion},
		"paths":       map[string]any{},
		"definitions": map[string]any{},
	})
}

var _ = registry.Kind{}
