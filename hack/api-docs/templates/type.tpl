{{- /* One type: a kind, a struct with its fields, or a string type with its values. Called with a dict of
       "type" and "heading" (the Markdown heading level). */ -}}
{{- define "type" -}}
{{- $type := .type -}}
{{ .heading }} {{ $type.Name }}
{{ with $type.Doc }}
{{ template "prose" . }}
{{ end }}
{{- with $type.GVK }}
`apiVersion: {{ .Group }}/{{ .Version }}`, `kind: {{ .Kind }}`
{{ end }}
{{- if $type.References }}
Appears in: {{ range $i, $ref := $type.SortedReferences }}{{ if $i }}, {{ end }}{{ markdownRenderTypeLink $ref }}{{ end }}
{{ end }}
{{- with (index $type.Markers "kubebuilder:validation:XValidation") }}
Rules checked at admission:
{{ range . }}
- {{ template "rule" . }}
{{- end }}
{{ end }}
{{- if $type.Members }}
Fields:
{{ range $type.Members }}
{{ template "field" . }}
{{- end }}
{{ end }}
{{- if $type.EnumValues }}
Values ({{ markdownRenderTypeLink $type.UnderlyingType }}):
{{ range $type.EnumValues }}
{{- /* A value's doc comment starts with its Go name ("QuorumLossManual: ..."); the value stands for it. */}}
- `{{ .Name }}`{{ with .Doc }}: {{ template "prose" (regexReplaceAll "^[A-Z][A-Za-z0-9]*: " (. | trim | replace "\n" " ") "") }}{{ end }}
{{- end }}
{{ else if $type.IsAlias }}
Type: {{ markdownRenderTypeLink $type.UnderlyingType }}
{{ end }}
{{- end -}}

{{- /* A CEL rule by its message, which is what the API server answers; the rule itself when it has none. */ -}}
{{- define "rule" -}}
{{- if .Message }}{{ template "prose" .Message }}{{ else if .MessageExpression }}`{{ .MessageExpression }}`{{ else }}`{{ .Rule }}`{{ end -}}
{{- end -}}
