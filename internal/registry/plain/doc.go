// Package plain tells whether a JSON object, as decoded into a map, is
// already what decoding it into a Kubernetes Go type and converting that
// back to a map would give: every member a field of the type, every value
// of the field's type and written back unchanged. The registry uses it to
// skip that round trip (a strict decode by reflection and the unstructured
// converter) for request bodies, merge patches and custom resources'
// metadata, leaving everything it does not vouch for to the round trip.
package plain
