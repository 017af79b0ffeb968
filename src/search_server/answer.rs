//! Turning a Gemini `generateContent` response into the tool's text: the answer, then `---`,
//! the grounding sources as a numbered markdown list (deduplicated by URL, empty URLs dropped,
//! at most [`MAX_SOURCES`]) and the search queries (at most [`MAX_QUERIES`]); either list is
//! left out when empty.

use serde_json::Value;

pub const MAX_SOURCES: usize = 12;
pub const MAX_QUERIES: usize = 8;

/// What a response held, or why it holds no answer.
#[derive(Debug, PartialEq)]
pub enum Parsed {
    Answer(String),
    /// No usable candidate: the reason, for an `[API_ERROR]`.
    Empty(String),
}

/// Read the answer out of a response body and format it.
pub fn format_response(body: &Value) -> Parsed {
    let Some(candidate) = body
        .get("candidates")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
    else {
        let why = match body
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            Some(reason) => format!("Gemini blocked the question ({reason})"),
            None => "Gemini returned no answer (no candidates)".to_owned(),
        };
        return Parsed::Empty(why);
    };
    let text: String = candidate
        .pointer("/content/parts")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        // A thinking model's thought summaries are not the answer.
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("");
    let text = text.trim();
    if text.is_empty() {
        let reason = candidate
            .get("finishReason")
            .and_then(Value::as_str)
            .unwrap_or("no text");
        return Parsed::Empty(format!("Gemini returned an empty answer ({reason})"));
    }
    let grounding = candidate.get("groundingMetadata");
    let mut sources: Vec<(String, String)> = Vec::new();
    for chunk in grounding
        .and_then(|g| g.get("groundingChunks"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(web) = chunk.get("web") else {
            continue;
        };
        let url = web.get("uri").and_then(Value::as_str).unwrap_or("").trim();
        if url.is_empty() || sources.iter().any(|(u, _)| u == url) {
            continue;
        }
        let title = web
            .get("title")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .unwrap_or(url);
        sources.push((url.to_owned(), title.to_owned()));
        if sources.len() == MAX_SOURCES {
            break;
        }
    }
    let mut queries: Vec<String> = Vec::new();
    for q in grounding
        .and_then(|g| g.get("webSearchQueries"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::trim)
        .filter(|q| !q.is_empty())
    {
        if !queries.iter().any(|x| x == q) {
            queries.push(q.to_owned());
        }
        if queries.len() == MAX_QUERIES {
            break;
        }
    }
    let mut out = text.to_owned();
    if !sources.is_empty() || !queries.is_empty() {
        out.push_str("\n\n---");
    }
    if !sources.is_empty() {
        out.push_str("\n\n**Sources:**\n");
        for (i, (url, title)) in sources.iter().enumerate() {
            out.push_str(&format!("{}. [{}]({url})\n", i + 1, escape_title(title)));
        }
    }
    if !queries.is_empty() {
        out.push_str(if sources.is_empty() { "\n\n" } else { "\n" });
        out.push_str("**Search queries performed:**\n");
        for (i, q) in queries.iter().enumerate() {
            out.push_str(&format!("{}. {q}\n", i + 1));
        }
    }
    Parsed::Answer(out.trim_end().to_owned())
}

/// Square brackets in a title would end the link text early.
fn escape_title(title: &str) -> String {
    title.replace('[', "\\[").replace(']', "\\]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn response(chunks: Value, queries: Value) -> Value {
        json!({"candidates": [{
            "content": {"parts": [{"text": "Rust 1.95 "}, {"text": "is current."}]},
            "groundingMetadata": {"groundingChunks": chunks, "webSearchQueries": queries}
        }]})
    }

    #[test]
    fn sources_are_deduplicated_capped_and_numbered() {
        let mut chunks = vec![
            json!({"web": {"uri": "https://a.example", "title": "A"}}),
            json!({"web": {"uri": "https://a.example", "title": "A again"}}),
            json!({"web": {"uri": "", "title": "empty"}}),
            json!({"retrievedContext": {}}),
        ];
        for i in 0..20 {
            chunks.push(json!({"web": {"uri": format!("https://s{i}.example"), "title": format!("[S{i}]")}}));
        }
        let queries: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
        let Parsed::Answer(text) = format_response(&response(json!(chunks), json!(queries))) else {
            panic!()
        };
        assert!(text.starts_with("Rust 1.95 is current.\n\n---\n\n**Sources:**\n1. [A](https://a.example)\n2. [\\[S0\\]](https://s0.example)\n"), "{text}");
        assert!(
            text.contains(
                "12. [\\[S10\\]](https://s10.example)\n\n**Search queries performed:**\n1. q0\n"
            ),
            "{text}"
        );
        assert!(!text.contains("s11.example"), "{text}");
        assert!(text.ends_with("8. q7"), "{text}");
        assert!(!text.contains("empty"));
    }

    #[test]
    fn without_grounding_only_the_text() {
        let body = json!({"candidates": [{"content": {"parts": [
            {"text": "Let me think about it.", "thought": true},
            {"text": "Just this.", "thoughtSignature": "c2ln"}
        ]}}]});
        assert_eq!(format_response(&body), Parsed::Answer("Just this.".into()));
        let only_queries = response(json!([]), json!(["rust release"]));
        let Parsed::Answer(text) = format_response(&only_queries) else {
            panic!()
        };
        assert_eq!(
            text,
            "Rust 1.95 is current.\n\n---\n\n**Search queries performed:**\n1. rust release"
        );
    }

    #[test]
    fn blocked_and_empty() {
        let blocked = json!({"promptFeedback": {"blockReason": "SAFETY"}});
        assert_eq!(
            format_response(&blocked),
            Parsed::Empty("Gemini blocked the question (SAFETY)".into())
        );
        let empty =
            json!({"candidates": [{"finishReason": "MAX_TOKENS", "content": {"parts": []}}]});
        assert_eq!(
            format_response(&empty),
            Parsed::Empty("Gemini returned an empty answer (MAX_TOKENS)".into())
        );
    }
}
