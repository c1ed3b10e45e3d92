package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// benchList is the list scenarios' answer: 10,000 bulk ConfigMaps of the
// payload k as a server holds them after the create scenario (a uid, a
// resourceVersion, a creation time, the label and one managedFields entry
// each).
func benchList(k payloadKind) *corev1.ConfigMapList {
	now := metav1.NewTime(time.Date(2026, 11, 26, 2, 30, 0, 0, time.UTC))
	const fields = `{"f:data":{".":{},"f:payload":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`
	l := &corev1.ConfigMapList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMapList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "20001"},
		Items:    make([]corev1.ConfigMap, 10000),
	}
	for i := range l.Items {
		l.Items[i] = corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:              bulkName(i),
				Namespace:         "kplane-bench-5f7c2",
				UID:               types.UID(fmt.Sprintf("6f1c9a52-3b0e-4d7a-9c1e-%012d", i)),
				ResourceVersion:   fmt.Sprint(10000 + i),
				CreationTimestamp: now,
				Labels:            map[string]string{"app": "kplane-bench"},
				ManagedFields: []metav1.ManagedFieldsEntry{{
					Manager: "kplane-bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
					Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields),
				}},
			},
			Data: map[string]string{"payload": k.value(i)},
		}
	}
	return l
}

// BenchmarkClientGoListDecode is the client's floor under the
// list-consistent scenario: client-go's typed clientset decoding a list of
// 10,000 ConfigMaps of 1 KiB that is already in memory, in each wire format,
// through the decoder its REST client negotiates for the answer's content
// type, for each payload. No server, no network: whatever a server does, a
// list cannot reach the client faster than this.
func BenchmarkClientGoListDecode(b *testing.B) {
	for _, k := range payloadKinds {
		b.Run("payload="+string(k), func(b *testing.B) { benchListDecode(b, benchList(k)) })
	}
}

func benchListDecode(b *testing.B, list *corev1.ConfigMapList) {
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		b.Run(mediaType[len("application/"):], func(b *testing.B) {
			info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.WithoutConversion().SupportedMediaTypes(), mediaType)
			if !ok {
				b.Fatalf("client-go offers no serializer for %s", mediaType)
			}
			var body bytes.Buffer
			if err := info.Serializer.Encode(list, &body); err != nil {
				b.Fatal(err)
			}
			dec := runtime.NewClientNegotiator(scheme.Codecs.WithoutConversion(), corev1.SchemeGroupVersion)
			d, err := dec.Decoder(mediaType, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(body.Len()))
			for b.Loop() {
				var out corev1.ConfigMapList
				if err := runtime.DecodeInto(d, body.Bytes(), &out); err != nil {
					b.Fatal(err)
				}
				if len(out.Items) != len(list.Items) {
					b.Fatalf("decoded %d items, want %d", len(out.Items), len(list.Items))
				}
			}
			b.ReportMetric(float64(body.Len())/1e6, "body-MB")
		})
	}
}

// BenchmarkClientGoMetadataListDecode is the same floor under the
// list-metadata scenario: client-go's metadata client decoding the
// PartialObjectMetadataList of those 10,000 ConfigMaps, through the
// decoder its REST client negotiates, in JSON (what kplane answered it
// until the nineteenth pass) and in protobuf (what it asks for first, and
// what kube-apiserver answers).
func BenchmarkClientGoMetadataListDecode(b *testing.B) {
	list := benchList(payloadText) // the payload is not in the metadata
	meta := &metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"},
		ListMeta: list.ListMeta,
	}
	for _, it := range list.Items {
		meta.Items = append(meta.Items, metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadata"},
			ObjectMeta: it.ObjectMeta,
		})
	}
	codecs := metainternalversionscheme.Codecs.WithoutConversion()
	for _, mediaType := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		b.Run(mediaType[len("application/"):], func(b *testing.B) {
			info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mediaType)
			if !ok {
				b.Fatalf("the metadata client offers no serializer for %s", mediaType)
			}
			var body bytes.Buffer
			if err := info.Serializer.Encode(meta, &body); err != nil {
				b.Fatal(err)
			}
			d, err := runtime.NewClientNegotiator(codecs, metav1.SchemeGroupVersion).Decoder(mediaType, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(body.Len()))
			for b.Loop() {
				obj, _, err := d.Decode(body.Bytes(), nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if out, ok := obj.(*metav1.PartialObjectMetadataList); !ok || len(out.Items) != len(list.Items) {
					b.Fatalf("decoded %T", obj)
				}
			}
			b.ReportMetric(float64(body.Len())/1e6, "body-MB")
		})
	}
}
