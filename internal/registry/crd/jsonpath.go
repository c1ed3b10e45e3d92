package crd

import (
	"strconv"
	"strings"
)

// jsonPath is the subset of JSONPath additionalPrinterColumns use in
// practice: dotted fields with optional [n] indexes, such as
// .spec.replicas or .status.conditions[0].status. Anything else yields no
// value (kubectl shows <none>), never an error.
type jsonPath []string

func parseJSONPath(p string) jsonPath {
	p = strings.TrimSpace(p)
	p = strings.TrimPrefix(strings.TrimSuffix(p, "}"), "{")
	p = strings.TrimPrefix(p, "$")
	var out jsonPath
	for _, seg := range strings.Split(strings.TrimPrefix(p, "."), ".") {
		for seg != "" {
			i := strings.IndexByte(seg, '[')
			if i < 0 {
				out = append(out, seg)
				break
			}
			if i > 0 {
				out = append(out, seg[:i])
			}
			j := strings.IndexByte(seg, ']')
			if j < i {
				return nil
			}
			out = append(out, seg[i:j+1])
			seg = seg[j+1:]
		}
	}
	return out
}

func (p jsonPath) get(obj map[string]any) (any, bool) {
	if len(p) == 0 {
		return nil, false
	}
	var cur any = obj
	for _, seg := range p {
		if strings.HasPrefix(seg, "[") {
			n, err := strconv.Atoi(strings.Trim(seg, "[]"))
			list, ok := cur.([]any)
			if err != nil || !ok {
				return nil, false
			}
			if n < 0 {
				n += len(list)
			}
			if n < 0 || n >= len(list) {
				return nil, false
			}
			cur = list[n]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[seg]; !ok {
			return nil, false
		}
	}
	return cur, true
}
