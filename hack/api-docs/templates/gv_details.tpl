{{- define "gvDetails" -}}
{{- $gv := . -}}
{{- /* The kinds, EtcdCluster first (the one every other kind refers to), then alphabetically. */ -}}
{{- $kinds := list -}}
{{- if has "EtcdCluster" $gv.SortedKinds }}{{ $kinds = append $kinds "EtcdCluster" }}{{ end -}}
{{- range $gv.SortedKinds }}{{ if ne . "EtcdCluster" }}{{ $kinds = append $kinds . }}{{ end }}{{ end -}}
## {{ $gv.GroupVersionString }}

{{ template "prose" (trim $gv.Doc) }}

Kinds:
{{- range $kinds }}
- {{ $gv.TypeForKind . | markdownRenderTypeLink }}
{{- end }}

Also: [other types](#other-types) the kinds use, and the [condition types and reasons](#condition-types-and-reasons)
of their status.
{{ $done := dict -}}
{{- range $kinds }}
{{- $kind := $gv.TypeForKind . }}
{{- $_ := set $done $kind.Name true }}
{{ template "type" (dict "type" $kind "heading" "##") }}
{{- range $kind.Members }}
{{- if and (or (eq .Name "spec") (eq .Name "status")) (not (hasKey $done .Type.Name)) }}
{{- $_ := set $done .Type.Name true }}
{{ template "type" (dict "type" .Type "heading" "###") }}
{{- end }}
{{- end }}
{{- end }}
## Other types
{{ range $gv.SortedTypes }}
{{- if and (not (hasKey $done .Name)) (markdownShouldRenderType .) }}
{{ template "type" (dict "type" . "heading" "###") }}
{{- end }}
{{- end }}
{{- end -}}

{{- /* Doc comment text as Markdown: a '<' would open an HTML tag (<cluster> would vanish), a '*' emphasis. */ -}}
{{- define "prose" -}}
{{- . | replace "<" "\\<" | replace "*" "\\*" -}}
{{- end -}}
