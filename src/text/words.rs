//! Word-level English: the sorted word lists every other `text` module looks words up in, the
//! small string helpers they share, content words (with the deliberately light [`light_stem`])
//! and time expressions.
//!
//! Everything here is plain rules over std strings — no regex, no model — so that the merge and
//! split strategies built on it stay deterministic and cost microseconds.

use std::collections::BTreeSet;

// ---------------------------------------------------------------------------------------
// Word lists. Every list is sorted (checked by a unit test) and searched with binary_search.
// ---------------------------------------------------------------------------------------

/// Small English stopword list (lowercase, sorted). Also holds contraction fragments that
/// tokenisation on non-alphanumerics leaves behind ("didn't" -> "didn", "t").
#[rustfmt::skip]
pub(super) const STOPWORDS: &[&str] = &[
    "a", "about", "above", "after", "again", "against", "all", "also", "am", "an", "and", "any",
    "are", "aren", "as", "at", "be", "because", "been", "before", "being", "below", "between",
    "both", "but", "by", "can", "could", "couldn", "did", "didn", "do", "does", "doesn", "doing",
    "don", "down", "during", "each", "even", "ever", "every", "few", "for", "from", "further",
    "had", "hadn", "has", "hasn", "have", "haven", "having", "he", "her", "here", "hers",
    "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "isn", "it", "its",
    "itself", "just", "ll", "me", "more", "most", "much", "my", "myself", "no", "nor", "not",
    "now", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out",
    "over", "own", "re", "really", "same", "she", "should", "shouldn", "so", "some", "such",
    "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these",
    "they", "this", "those", "through", "to", "too", "under", "until", "up", "upon", "us", "ve",
    "very", "was", "wasn", "we", "were", "weren", "what", "when", "where", "which", "while", "who",
    "whom", "why", "will", "with", "would", "wouldn", "you", "your", "yours", "yourself",
    "yourselves",
];

/// Abbreviations after which a single "." does not end a sentence (lowercase, no dot).
#[rustfmt::skip]
pub(super) const ABBREVIATIONS: &[&str] = &[
    "approx", "apr", "aug", "ave", "blvd", "capt", "co", "corp", "dec", "dept", "dr", "feb", "fig",
    "gen", "gov", "inc", "jan", "jr", "jul", "jun", "lt", "ltd", "mar", "mr", "mrs", "ms", "mt",
    "nov", "oct", "prof", "rd", "rev", "sen", "sep", "sept", "sgt", "sr", "st", "vs",
];

/// Auxiliaries, modals, their negated contractions and common irregular past forms: words
/// that, lowercase at the start of a clause, mark a verb (so the clause lacks a subject).
#[rustfmt::skip]
pub(super) const VERB_FORMS: &[&str] = &[
    "am", "are", "aren't", "ate", "became", "began", "bought", "broke", "brought", "built", "came",
    "can", "can't", "cannot", "caught", "chose", "could", "couldn't", "dealt", "did", "didn't",
    "does", "doesn't", "drank", "drew", "drove", "dug", "fed", "fell", "felt", "flew", "forgave",
    "forgot", "fought", "found", "froze", "gave", "got", "grew", "had", "hadn't", "has", "hasn't",
    "have", "haven't", "heard", "held", "hid", "hung", "is", "isn't", "kept", "knew", "led",
    "left", "lit", "lost", "made", "meant", "met", "might", "must", "paid", "ran", "rang", "rode",
    "rose", "said", "sang", "sat", "saw", "sent", "shall", "shook", "should", "shouldn't", "slept",
    "sold", "spent", "spoke", "stood", "struck", "swam", "swore", "taught", "thought", "threw",
    "told", "took", "tore", "understood", "was", "wasn't", "went", "wept", "were", "weren't",
    "will", "woke", "won", "won't", "wore", "would", "wouldn't", "wrote",
];

/// Base forms of common verbs; "<stem>s", "<stem>es" and "<stem minus y>ies" count as verbs.
#[rustfmt::skip]
pub(super) const VERB_STEMS: &[&str] = &[
    "accept", "achieve", "acknowledge", "add", "admire", "admit", "adopt", "advise", "agree",
    "aim", "allow", "apologize", "appear", "appreciate", "arrive", "ask", "attend", "avoid",
    "bake", "be", "become", "begin", "believe", "belong", "bond", "borrow", "break", "bring",
    "build", "buy", "call", "capture", "care", "catch", "celebrate", "change", "check", "cherish",
    "choose", "clean", "climb", "collect", "come", "compete", "complete", "connect", "consider",
    "continue", "contribute", "cook", "create", "cry", "dance", "deal", "decide", "describe",
    "design", "develop", "discover", "discuss", "do", "donate", "draw", "dream", "drink", "drive",
    "earn", "eat", "edit", "embrace", "emphasize", "encourage", "enjoy", "enter", "experience",
    "explain", "explore", "express", "face", "fail", "feed", "feel", "fight", "find", "finish",
    "fix", "fly", "focus", "follow", "forget", "gain", "gather", "get", "give", "go", "grab",
    "grow", "hang", "hate", "hear", "help", "highlight", "hike", "hold", "hope", "host", "hurt",
    "imagine", "improve", "include", "inspire", "intend", "invest", "invite", "join", "keep",
    "know", "laugh", "launch", "lead", "learn", "leave", "lift", "like", "listen", "live", "look",
    "lose", "love", "make", "manage", "mean", "meet", "mention", "miss", "move", "need", "notice",
    "offer", "open", "organize", "own", "paint", "participate", "pass", "perform", "pick", "plan",
    "plant", "play", "post", "practice", "practise", "praise", "pray", "prefer", "prepare",
    "present", "prioritize", "produce", "promote", "protect", "publish", "pursue", "push", "raise",
    "reach", "read", "realize", "reassure", "recall", "receive", "recognize", "recommend",
    "record", "reflect", "relax", "release", "rely", "remain", "remember", "remind", "reminisce",
    "rent", "repair", "rescue", "research", "respect", "return", "reveal", "ride", "rise", "run",
    "save", "say", "see", "seek", "seem", "sell", "send", "serve", "share", "shop", "show", "sing",
    "sit", "sleep", "smile", "solve", "speak", "spend", "stand", "start", "stay", "stop",
    "struggle", "study", "suggest", "support", "surf", "swim", "take", "talk", "teach", "tell",
    "tend", "thank", "think", "train", "travel", "treat", "trust", "try", "turn", "understand",
    "use", "value", "view", "visit", "volunteer", "vote", "wait", "wake", "walk", "wander", "want",
    "warn", "watch", "wear", "win", "wish", "wonder", "work", "worry", "write",
];

/// "-ed" words that are usually adjectives ("excited", "supported by") rather than a verb
/// starting a new clause, plus "-ed" words that are not verbs at all.
#[rustfmt::skip]
pub(super) const NOT_VERB_ED: &[&str] = &[
    "accepted", "addicted", "advanced", "amazed", "amused", "animated", "annoyed", "appreciated",
    "ashamed", "attached", "based", "bed", "beloved", "blessed", "bored", "called", "challenged",
    "committed", "complicated", "concerned", "confused", "connected", "convinced", "crowded",
    "dedicated", "delighted", "depressed", "detailed", "determined", "devastated", "devoted",
    "disappointed", "distracted", "drained", "dubbed", "elated", "embarrassed", "empowered",
    "encouraged", "energized", "engaged", "excited", "exhausted", "experienced", "fascinated",
    "focused", "frightened", "frustrated", "fulfilled", "gifted", "grounded", "hatred", "honored",
    "humbled", "hundred", "impressed", "indeed", "inspired", "interested", "intrigued", "involved",
    "isolated", "kindred", "labeled", "limited", "loved", "mixed", "motivated", "moved", "naked",
    "named", "overjoyed", "overwhelmed", "pleased", "prepared", "privileged", "puzzled",
    "qualified", "red", "refreshed", "rejuvenated", "related", "relaxed", "relieved", "renewed",
    "renowned", "rested", "sacred", "saddened", "satisfied", "scared", "shocked", "skilled",
    "sophisticated", "stressed", "stunned", "supported", "surprised", "talented", "terrified",
    "thrilled", "tired", "titled", "touched", "troubled", "unexpected", "unmatched", "valued",
    "varied", "wicked", "worried",
];

/// Adverbs skipped when looking at how a clause starts ("and then went ...").
#[rustfmt::skip]
pub(super) const CLAUSE_ADVERBS: &[&str] = &[
    "actually", "also", "always", "eventually", "finally", "just", "later", "never", "now",
    "often", "really", "recently", "soon", "still", "then", "usually",
];

/// Words that open an embedded clause with its own subject ("believes that nature refreshes
/// her soul and helps ..."): a later subjectless verb might belong to that clause instead.
#[rustfmt::skip]
pub(super) const SUBORDINATORS: &[&str] = &[
    "although", "because", "how", "if", "since", "that", "when", "where", "whether", "which",
    "while", "who", "whom", "whose",
];

/// Words that, between a clause's subject and its verb, show it is not a clause start
/// ("her family and appreciates ...", "the help she received").
#[rustfmt::skip]
pub(super) const NOT_IN_SUBJECT: &[&str] = &[
    "and", "but", "he", "i", "it", "or", "she", "that", "they", "we", "which", "who", "whom", "whose",
    "you",
];

/// Prepositions that typically follow a plural noun rather than a verb ("experiences with").
#[rustfmt::skip]
pub(super) const PREPOSITIONS: &[&str] = &["from", "of", "with"];

/// Prepositions after which an ambiguous form reads as a noun or a participle
/// ("insurance and repairs after ...", "the progress made with ...").
#[rustfmt::skip]
pub(super) const WIDE_PREPOSITIONS: &[&str] =
    &["about", "after", "at", "before", "by", "for", "from", "in", "of", "on", "to", "with"];

/// Prepositions after which an "-s" form with no present tense to its left reads as a plural
/// noun ("had to deal with insurance and repairs after the accident").
#[rustfmt::skip]
pub(super) const NOUN_PREPOSITIONS: &[&str] = &["after", "before", "by", "for", "from"];

/// Irregular simple pasts that are never past participles ("their relationship grew from").
#[rustfmt::skip]
pub(super) const PAST_ONLY: &[&str] = &[
    "ate", "became", "began", "broke", "came", "chose", "drank", "drew", "drove", "fell", "flew",
    "forgave", "forgot", "froze", "gave", "grew", "knew", "ran", "rang", "rode", "rose", "sang",
    "saw", "shook", "spoke", "swam", "swore", "threw", "took", "tore", "went", "woke", "wore",
    "wrote",
];

/// Finite auxiliaries and modals (never participles).
#[rustfmt::skip]
pub(super) const AUXILIARIES: &[&str] = &[
    "am", "are", "can", "could", "did", "does", "had", "has", "have", "is", "might", "must",
    "shall", "should", "was", "were", "will", "would",
];

/// Subject pronouns (lowercase).
#[rustfmt::skip]
pub(super) const SUBJECT_PRONOUNS: &[&str] = &["he", "i", "it", "she", "they", "we", "you"];

/// Determiners/possessives that can open a noun-phrase subject ("her kids loved it").
#[rustfmt::skip]
pub(super) const DETERMINERS: &[&str] = &[
    "a", "all", "an", "both", "each", "every", "her", "his", "its", "many", "most", "my", "no",
    "our", "some", "the", "their", "these", "this", "those", "your",
];

/// Words before a month that make "May"/"March" a month rather than a modal or a verb.
#[rustfmt::skip]
pub(super) const MONTH_CUES: &[&str] = &[
    "after", "before", "by", "during", "early", "every", "from", "in", "last", "late", "mid",
    "next", "of", "on", "since", "this", "through", "till", "until",
];

/// What a lowercase word can contribute to a time expression.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum TimeClass {
    /// "january" ... "december" ("may"/"march" need a cue).
    Month,
    /// "jan", "sept", ...: only next to a number.
    MonthAbbreviation,
    /// Weekdays, parts of the day/week: a time expression alone, optionally with a modifier.
    Day,
    /// "yesterday", "recently", holidays: a time expression alone.
    Word,
    /// "week", "summer", "year": a time expression after a modifier ("last week").
    Unit,
    /// "ago".
    Ago,
    /// "am"/"pm" after a number.
    Clock,
}

/// One `match` instead of several list lookups: this runs on every token.
pub(super) fn time_class(l: &str) -> Option<TimeClass> {
    Some(match l {
        "january" | "february" | "march" | "april" | "may" | "june" | "july" | "august" | "september" | "october" | "november"
        | "december" => TimeClass::Month,
        "jan" | "feb" | "mar" | "apr" | "jun" | "jul" | "aug" | "sep" | "sept" | "oct" | "nov" | "dec" => TimeClass::MonthAbbreviation,
        "monday" | "tuesday" | "wednesday" | "thursday" | "friday" | "saturday" | "sunday" | "mondays" | "tuesdays" | "wednesdays"
        | "thursdays" | "fridays" | "saturdays" | "sundays" | "morning" | "afternoon" | "evening" | "night" | "weekend" | "weekends" => {
            TimeClass::Day
        }
        "yesterday" | "today" | "tomorrow" | "tonight" | "recently" | "lately" | "christmas" | "easter" | "halloween" | "thanksgiving" => {
            TimeClass::Word
        }
        "week" | "month" | "year" | "decade" | "semester" | "summer" | "winter" | "spring" | "fall" | "autumn" => TimeClass::Unit,
        "ago" => TimeClass::Ago,
        "am" | "pm" => TimeClass::Clock,
        _ => return None,
    })
}

/// Modifiers that anchor a time unit or day part.
#[rustfmt::skip]
pub(super) const TIME_MODIFIERS: &[&str] = &[
    "coming", "every", "following", "last", "next", "past", "previous", "that", "this",
    "tomorrow", "yesterday",
];

/// Whether `word` is in `list` (sorted, no empty word). Most of a binary search's steps are decided by the
/// first byte, compared inline: only words that share it are compared whole (this runs for every word of
/// every memory the reward reads).
pub(super) fn in_list(list: &[&str], word: &str) -> bool {
    let Some(&first) = word.as_bytes().first() else { return false };
    list.binary_search_by(|w| w.as_bytes().first().cmp(&Some(&first)).then_with(|| w.cmp(&word))).is_ok()
}

// ---------------------------------------------------------------------------------------
// Small string helpers
// ---------------------------------------------------------------------------------------

/// Sentence-ending punctuation.
pub fn is_terminator(c: char) -> bool {
    matches!(c, '.' | '!' | '?' | '…')
}

/// Closing quotes and brackets that may follow a sentence's end.
pub fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | '”' | '’' | ')' | ']' | '»')
}

pub(super) fn starts_upper(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_uppercase)
}

pub(super) fn starts_lower(s: &str) -> bool {
    s.chars().next().is_some_and(char::is_lowercase)
}

/// The word without surrounding punctuation ("found," -> "found", "(Caroline's" -> "Caroline's").
pub(super) fn core(raw: &str) -> &str {
    raw.trim_matches(|c: char| !c.is_alphanumeric())
}

/// Lowercase, with the typographic apostrophe folded to ASCII.
pub fn lower(s: &str) -> String {
    s.chars().map(|c| if c == '’' { '\'' } else { c }).flat_map(char::to_lowercase).collect()
}

/// A lowercase copy of a short ASCII word on the stack, for list lookups without allocating.
/// Words that are not ASCII (after folding "’" to "'") or longer than 24 bytes get an empty
/// key, which matches no list entry (all lists are short ASCII words).
#[derive(Clone, Copy)]
pub(super) struct Key {
    buf: [u8; 24],
    len: usize,
}

impl Key {
    pub(super) fn new(s: &str) -> Key {
        let mut k = Key { buf: [0; 24], len: 0 };
        for c in s.chars() {
            let c = if c == '’' { '\'' } else { c };
            if !c.is_ascii() || !k.push(c.to_ascii_lowercase() as u8) {
                return Key { buf: [0; 24], len: 0 };
            }
        }
        k
    }

    pub(super) fn push(&mut self, b: u8) -> bool {
        if self.len == self.buf.len() {
            return false;
        }
        self.buf[self.len] = b;
        self.len += 1;
        true
    }

    pub(super) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

/// Case-insensitive list membership (lists hold lowercase ASCII words).
pub(super) fn in_list_ci(list: &[&str], word: &str) -> bool {
    in_list(list, Key::new(word).as_str())
}

/// Trims, drops a dangling ",;:" or dash, and appends "." unless the text already ends with
/// terminal punctuation (possibly followed by closing quotes/brackets).
pub fn ensure_terminal(s: &str) -> String {
    let t = s.trim().trim_end_matches(|c: char| matches!(c, ',' | ';' | ':' | '-' | '–' | '—') || c.is_whitespace());
    if t.is_empty() {
        return String::new();
    }
    if t.trim_end_matches(is_closer).ends_with(is_terminator) {
        t.to_string()
    } else {
        format!("{t}.")
    }
}

/// Uppercases the first character when it is lowercase.
pub(super) fn capitalize_first(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_lowercase() => c.to_uppercase().chain(chars).collect(),
        Some(_) | None => s.to_string(),
    }
}

/// Dedup key: lowercase alphanumerics, everything else a single space.
pub fn dedup_key(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if c.is_alphanumeric() {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.extend(c.to_lowercase());
        } else {
            pending_space = true;
        }
    }
    out
}

/// Length in characters (not bytes): the unit of every text limit and budget.
pub fn char_len(s: &str) -> usize {
    s.chars().count()
}

/// Whitespace-separated word with its byte span in the source.
#[derive(Clone, Copy)]
pub(super) struct Word<'a> {
    pub(super) raw: &'a str,
    pub(super) start: usize,
    pub(super) end: usize,
}

pub(super) fn words(s: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push(Word { raw: &s[st..i], start: st, end: i });
                start = None;
            }
            (false, None) => start = Some(i),
            (true, None) | (false, Some(_)) => {}
        }
    }
    if let Some(st) = start {
        out.push(Word { raw: &s[st..], start: st, end: s.len() });
    }
    out
}

// ---------------------------------------------------------------------------------------
// Lexical features
// ---------------------------------------------------------------------------------------

/// Crude suffix strip so that inflections meet: "groups"/"group", "stories"/"story",
/// "painting"/"paints"/"paint", "attended"/"attend". ASCII suffixes only, so slicing is safe.
///
/// Deliberately not Porter ([`super::porter::stem`]): the merge and split strategies only need
/// inflections of one word to meet, and content words are pinned as readable words ("stories" ->
/// "story", "Caroline" -> "caroline", where Porter gives "stori" and "carolin"). Porter is for
/// LoCoMo's metric, where the stems must equal NLTK's.
pub fn light_stem(mut w: String) -> String {
    if w.len() > 4 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if w.ends_with("sses") {
        w.truncate(w.len() - 2);
    } else if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") && !w.ends_with("us") && !w.ends_with("is") {
        w.truncate(w.len() - 1);
    }
    if w.len() > 5 && w.ends_with("ing") {
        w.truncate(w.len() - 3);
    } else if w.len() > 4 && w.ends_with("ed") {
        w.truncate(w.len() - 2);
    }
    w
}

/// Content words of `s`: lowercase alphanumeric tokens (split at every non-alphanumeric
/// character, so "Melanie's" gives "melanie") that are not stopwords and have at least two
/// characters (or are numbers), each reduced by [`light_stem`] ("groups" -> "group").
pub fn content_words(s: &str) -> BTreeSet<String> {
    content_word_tokens(s).collect()
}

/// Whether `word` (one token, any case) is a stopword of [`content_words`]'s list: it says nothing on its own.
pub fn is_stopword(word: &str) -> bool {
    in_list(STOPWORDS, Key::new(word).as_str())
}

/// The content words of `s` as [`content_words`] reads them, in text order and with their repeats: the
/// multiset a memory's text adds to, or takes from, the memory.
pub fn content_word_tokens(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric()).filter_map(|t| {
        let key = content_key(t)?;
        let word = if key.as_str().is_empty() { lower(t) } else { key.as_str().to_string() };
        Some(light_stem(word))
    })
}

/// Whether `s` holds a content word ([`content_words`] of it is not empty), without building them: what
/// the reading budget counts, word by word, on every reading.
pub fn has_content_word(s: &str) -> bool {
    s.split(|c: char| !c.is_alphanumeric()).any(|t| content_key(t).is_some())
}

/// The key of token `t` when it is a content word (a token of [`content_words`]): not a single letter, not a
/// stopword. The key is empty for a token too long or not ASCII (still a content word).
fn content_key(t: &str) -> Option<Key> {
    let mut chars = t.chars();
    let first = chars.next()?;
    if chars.next().is_none() && !first.is_ascii_digit() {
        return None; // single letters ("s" of "Melanie's")
    }
    let key = Key::new(t);
    (!in_list(STOPWORDS, key.as_str())).then_some(key)
}

pub(super) fn is_number_token(l: &str) -> bool {
    let digits = l.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 4 {
        return false;
    }
    matches!(&l[digits..], "" | "st" | "nd" | "rd" | "th")
}

pub(super) fn is_year(l: &str) -> bool {
    l.len() == 4 && l.bytes().all(|b| b.is_ascii_digit()) && l.parse::<u16>().is_ok_and(|y| (1900..=2099).contains(&y))
}

/// "5/7/2023", "05-07-23": three groups of 1–4 digits separated by two "/" or two "-".
pub(super) fn is_numeric_date(tok: &str) -> bool {
    let t = tok.trim_matches(|c: char| !c.is_ascii_digit());
    [b'/', b'-'].iter().any(|&sep| {
        let mut groups = 0usize;
        let mut len = 0usize;
        for b in t.bytes() {
            if b == sep {
                if !(1..=4).contains(&len) {
                    return false;
                }
                groups += 1;
                len = 0;
            } else if b.is_ascii_digit() {
                len += 1;
            } else {
                return false;
            }
        }
        groups == 2 && (1..=4).contains(&len)
    })
}

/// Lowercased tokens joined by one space (the normalised form of a time expression).
pub(super) fn join_lower(toks: &[&str]) -> String {
    lower(&toks.join(" "))
}

/// The time expressions in `s`, normalised (lowercase, space-joined), in order of appearance.
pub fn time_expressions(s: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if s.contains(['/', '-']) {
        out.extend(s.split_whitespace().filter(|t| is_numeric_date(t)).map(lower));
    }
    let toks: Vec<&str> = s.split(|c: char| !c.is_alphanumeric()).filter(|t| !t.is_empty()).collect();
    let keys: Vec<Key> = toks.iter().map(|t| Key::new(t)).collect();
    let n = toks.len();
    let low = |i: usize| keys[i].as_str();
    let prev = |i: usize| if i > 0 { keys[i - 1].as_str() } else { "" };
    let with_modifier = |i: usize| {
        let start = if in_list(TIME_MODIFIERS, prev(i)) { i - 1 } else { i };
        join_lower(&toks[start..=i])
    };
    let mut i = 0;
    while i < n {
        let l = low(i);
        let class = time_class(l);
        let digit = l.as_bytes().first().is_some_and(u8::is_ascii_digit);
        if class.is_none() && !digit {
            i += 1;
            continue;
        }
        let prev_num = i > 0 && is_number_token(prev(i)) && !is_year(prev(i));
        let next_num = i + 1 < n && is_number_token(low(i + 1));
        let is_month = match class {
            Some(TimeClass::Month) if matches!(l, "may" | "march") => {
                starts_upper(toks[i]) && (prev_num || next_num || in_list(MONTH_CUES, prev(i)))
            }
            Some(TimeClass::Month) => true,
            Some(TimeClass::MonthAbbreviation) => starts_upper(toks[i]) && (prev_num || next_num),
            Some(TimeClass::Day | TimeClass::Word | TimeClass::Unit | TimeClass::Ago | TimeClass::Clock) | None => false,
        };
        if is_month {
            let start = if prev_num { i - 1 } else { i };
            let mut end = i + 1;
            if next_num {
                end += 1;
                if end < n && is_year(low(end)) && !is_year(low(end - 1)) {
                    end += 1;
                }
            }
            out.push(join_lower(&toks[start..end]));
            i = end;
            continue;
        }
        match class {
            Some(TimeClass::Word) => out.push(l.to_string()),
            Some(TimeClass::Day) => out.push(with_modifier(i)),
            Some(TimeClass::Unit) if in_list(TIME_MODIFIERS, prev(i)) => out.push(with_modifier(i)),
            Some(TimeClass::Unit) if l == "year" && prev(i) == "new" => out.push("new year".to_string()),
            Some(TimeClass::Ago) if i > 0 => out.push(join_lower(&toks[i.saturating_sub(2)..=i])),
            Some(TimeClass::Clock) if i > 0 && is_number_token(prev(i)) => {
                out.push(format!("{} {l}", prev(i)));
            }
            None if digit => {
                let decade = l.len() == 5 && l.ends_with('s') && is_year(&l[..4]);
                let clock = (l.ends_with("am") || l.ends_with("pm")) && is_number_token(&l[..l.len() - 2]);
                if is_year(l) || decade || clock {
                    out.push(l.to_string());
                }
            }
            Some(TimeClass::Month | TimeClass::MonthAbbreviation | TimeClass::Unit | TimeClass::Ago | TimeClass::Clock) | None => {}
        }
        i += 1;
    }
    out
}

/// Whether `s` contains a time expression: a month name (with its day/year when adjacent:
/// "7 May 2023", "May 7"; "May"/"March" only capitalised and next to a number or after a cue
/// such as "in"/"last"), a weekday, a year 1900–2099 or a decade ("2020s"), a numeric date
/// ("5/7/2023"), "yesterday"/"today"/"tomorrow"/"tonight"/"recently"/"lately", a holiday,
/// "morning"/"afternoon"/"evening"/"night"/"weekend", "last/next/this/past week|month|year|
/// summer|...", "... ago", or a clock time ("3pm", "3 pm").
pub fn has_time_expression(s: &str) -> bool {
    !time_expressions(s).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_lists_are_sorted_and_unique() {
        for list in [
            STOPWORDS,
            ABBREVIATIONS,
            VERB_FORMS,
            VERB_STEMS,
            NOT_VERB_ED,
            CLAUSE_ADVERBS,
            SUBJECT_PRONOUNS,
            DETERMINERS,
            PREPOSITIONS,
            WIDE_PREPOSITIONS,
            AUXILIARIES,
            NOUN_PREPOSITIONS,
            PAST_ONLY,
            SUBORDINATORS,
            NOT_IN_SUBJECT,
            MONTH_CUES,
            TIME_MODIFIERS,
        ] {
            for w in list.windows(2) {
                assert!(w[0] < w[1], "{:?} before {:?}", w[0], w[1]);
            }
            assert!(!list.contains(&""), "in_list skips the empty word");
            // The first-byte search answers as a plain binary search does, for every word, its prefixes,
            // and words between them.
            for w in list {
                for probe in [w.to_string(), format!("{w}a"), w[..w.len() - 1].to_string(), format!("{w}{{"), "".into()] {
                    assert_eq!(in_list(list, &probe), list.binary_search(&probe.as_str()).is_ok(), "{probe:?}");
                }
            }
        }
    }

    #[test]
    fn time_expressions_table() {
        let yes = [
            "Caroline went to the support group on 7 May 2023.",
            "They met on May 7.",
            "She moved there in May.",
            "Back in March she painted.",
            "Dave opened his shop last week.",
            "Jon lost his job yesterday.",
            "It happened in 2022.",
            "She went to a pride parade a few weeks ago.",
            "They played cards on Friday night.",
            "Nate won a tournament last Friday.",
            "The meeting is at 5pm.",
            "The meeting is at 5 pm.",
            "The party is on 5/7/2023.",
            "She has been painting recently.",
            "They celebrated Christmas together.",
            "She goes running every morning.",
            "He is heading to Japan next month.",
            "Music from the 1990s.",
        ];
        let no = [
            "Caroline likes pizza.",
            "She may go to the park.",
            "They march on.",
            "May went home.",
            "The year was great.",
            "He ran 1850 meters.",
            "Caroline found it inspiring.",
            "Jan likes jazz.",
            "Their spring cleaning is done.",
            "",
        ];
        for s in yes {
            assert!(has_time_expression(s), "expected a time expression in {s:?}");
        }
        for s in no {
            assert!(!has_time_expression(s), "unexpected time expression in {s:?}: {:?}", time_expressions(s));
        }
        assert_eq!(time_expressions("on 7 May 2023 and May 7, 2023"), vec!["7 may 2023", "may 7 2023"]);
        assert_eq!(time_expressions("last Friday and a few weeks ago"), vec!["last friday", "few weeks ago"]);
    }

    #[test]
    fn content_words_table() {
        let set = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(content_words("Caroline attended the LGBTQ support groups."), set(&["attend", "caroline", "group", "lgbtq", "support"]));
        assert_eq!(content_words("Melanie's stories"), set(&["melanie", "story"]));
        assert_eq!(content_words("the group"), content_words("groups"));
        assert_eq!(content_words("It is 7 May 2023"), set(&["2023", "7", "may"]));
        assert_eq!(content_words("Zoë's café in Zürich"), set(&["café", "zoë", "zürich"]));
        assert!(content_words("and the of it").is_empty());
        assert!(content_words("").is_empty());
        assert!(is_stopword("The") && !is_stopword("Caroline"));
    }

    proptest::proptest! {
        /// The budget's fast test agrees with the words themselves, whatever the text.
        #[test]
        fn has_content_word_is_content_words_not_empty(s in "\\PC{0,30}", t in "[a-zA-Z0-9' ,.éü-]{0,30}") {
            proptest::prop_assert_eq!(has_content_word(&s), !content_words(&s).is_empty());
            proptest::prop_assert_eq!(has_content_word(&t), !content_words(&t).is_empty());
        }

        /// The first-byte search is a binary search, whatever the word.
        #[test]
        fn in_list_is_a_binary_search(w in "[a-z']{0,8}|\\PC{0,6}") {
            for list in [STOPWORDS, VERB_STEMS, PREPOSITIONS, TIME_MODIFIERS] {
                proptest::prop_assert_eq!(in_list(list, &w), list.binary_search(&w.as_str()).is_ok());
            }
        }
    }
}
