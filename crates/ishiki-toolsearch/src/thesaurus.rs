//! Query expansion: the words a user types for a tool are often not the words its author
//! wrote ("unzip" for "extract archive", "PR" for "pull request", "how hot is it" for a weather
//! tool). A small hand-written thesaurus of general tool vocabulary bridges the common gaps.
//!
//! Each line of [`GROUPS`] is one of:
//! - `a b c` — related words; each expands to the others at [`RELATED`] weight;
//! - `a b > x y` — the left words expand to the right ones (a narrower word to its topic), not
//!   back;
//! - `= a b` — the same thing spelled differently (abbreviations); each expands to the others
//!   at [`SAME`] weight. The second member is the spelled-out form: the semantic ranker embeds
//!   a query with the shorter members replaced by it (`spell_out`, feature `semantic`).
//!
//! `+` joins the words of a phrase: on the left of an expansion a phrase matches consecutive
//! words of the query (stopwords included, so `look+up` works); as a target each of its
//! meaningful words becomes a term. Every word goes through the same stemmer as the index.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::text::{is_stopword, stem_in_place};

/// Weight of a related word, against 1 for a word the user typed.
pub(crate) const RELATED: f64 = 0.5;
/// Weight of another spelling of the same thing: as if typed.
pub(crate) const SAME: f64 = 1.0;

const GROUPS: &[&str] = &[
    // Verbs of managing things.
    "delete remove erase destroy trash purge discard unlink wipe forget drop get+rid",
    "create make add new generate insert register set+up",
    "list enumerate browse show+all",
    "get fetch retrieve obtain read load view show display see open inspect",
    "find search locate lookup look+up look+for query discover seek",
    "update modify edit change alter patch amend adjust tweak set",
    "write save store persist put",
    "send post deliver dispatch transmit notify share",
    "reply respond answer",
    "forward relay pass+on",
    "copy duplicate clone fork replicate",
    "move relocate transfer",
    "rename retitle",
    "replace overwrite substitute swap",
    "download fetch save+from",
    "upload attach share",
    "run execute exec launch invoke trigger start kick+off",
    "stop halt kill terminate abort shut+down",
    "cancel call+off > delete stop",
    "forget > memory",
    "restart reboot reload bounce",
    "close resolve finish complete done check+off",
    "merge combine join concatenate integrate",
    "compare diff difference",
    "count tally how+many",
    "undo revert reset rollback",
    // Time and scheduling.
    "calendar agenda schedule diary",
    "schedule book plan arrange",
    "event meeting appointment standup session",
    "invite invitation rsvp",
    "accept decline tentative rsvp",
    "free available availability",
    "reschedule postpone > update event",
    "time clock date today now current",
    "timezone time+zone utc",
    "timer countdown alarm stopwatch",
    "second minute hour duration",
    "remind reminder",
    "recent recently latest newest history",
    // Messaging.
    "email mail inbox",
    "message chat dm conversation",
    "= dm direct+message",
    "channel room",
    "thread replies conversation",
    "reaction emoji react",
    "status presence",
    "sms text+message",
    "notify alert ping notification",
    "draft compose prepare",
    // People and business.
    "user person member people account colleague teammate employee",
    "profile bio",
    "contact lead prospect",
    "customer client buyer shopper",
    "deal opportunity sale pipeline",
    "invoice bill billing receipt",
    "payment charge pay checkout purchase",
    "refund reimburse money+back chargeback",
    "balance funds",
    "price cost fee how+much",
    "currency exchange+rate forex",
    "euro euros dollar dollars usd eur gbp yen pound+sterling > currency",
    "stock share ticker equity trading",
    // Places, travel, weather.
    "weather forecast temperature rain snow wind sunny",
    "hot cold warm humid > weather temperature",
    "alert warning advisory",
    "storm hurricane tornado flood > weather alert",
    "air+quality pollution smog aqi",
    "location place address position venue",
    "coordinates latitude longitude gps",
    "= lat latitude",
    "= lng longitude lon",
    "directions route navigate itinerary commute way+to get+from",
    "distance how+far travel+time",
    "nearby near around local",
    "restaurant cafe coffee shop store",
    "flight plane airline airfare fly",
    "hotel accommodation lodging stay motel",
    "trip travel journey vacation",
    "train bus subway metro > transit",
    // Language and text.
    "translate translation",
    "japanese french german spanish chinese korean italian portuguese russian arabic hindi dutch > language translate",
    "summarize summary digest tldr gist condense recap overview",
    "sentiment tone mood positive negative",
    "calculate compute evaluate math arithmetic percent percentage formula equation",
    "kilometer kilometre mile meter metre feet foot inch pound kilogram celsius fahrenheit liter litre gallon ounce > unit",
    "= km kilometer",
    "= kg kilogram",
    "convert transform transcode turn+into",
    "random shuffle pick dice coin",
    "= uuid unique+identifier guid",
    "hash checksum digest fingerprint",
    "pretty+print beautify prettify indent",
    "= regex regular+expression regexp",
    "text content contents words",
    "log logs output stdout stderr console",
    "error failure crash exception fail",
    // Media.
    "image picture photo pic img photograph graphic",
    "screenshot screen+capture screen+grab",
    "screen display monitor desktop",
    "ocr scan scanned text+recognition",
    "resize scale shrink enlarge",
    "width wide",
    "height tall",
    "pixel px dimension",
    "crop cut+out",
    "trim cut clip shorten",
    "video movie clip film footage",
    "frame still thumbnail",
    "audio sound recording voice podcast",
    "transcribe transcription transcript dictation speech+to+text",
    "speech speak aloud narrate read+aloud text+to+speech",
    "= tts text+to+speech",
    "mp3 wav ogg > audio",
    "draw illustration artwork render paint",
    "describe caption explain",
    "qr barcode scannable",
    "pdf document",
    // Files.
    "folder directory dir",
    "archive zip tarball tar compressed bundle",
    "extract unpack unzip decompress untar",
    "compress zip pack",
    "size bytes big large how+big",
    "metadata info information details properties attributes",
    "modified changed updated last+modified",
    "permission access acl allowed",
    "tree hierarchy structure nested recursive",
    "line row",
    // Code and repositories.
    "commit check+in",
    "uncommitted unstaged untracked dirty working+tree local+changes",
    "stage staging index",
    "unstage reset",
    "tag label mark version",
    "label tag category",
    "push publish",
    "pull sync upstream bring+in",
    "remote origin upstream",
    "blame annotate who+changed",
    "stash shelve",
    "repository repo project codebase",
    "= pr pull+request merge+request",
    "issue ticket bug",
    "comment remark feedback",
    "review approve approval",
    "= ci continuous+integration",
    "ci pipeline workflow build",
    "code source codebase",
    // The web.
    "internet web online",
    "url link address href uri",
    "website webpage page site",
    "news headline headlines article",
    "down uptime online offline reachable alive health",
    "domain dns hostname",
    "whois registrar registration expiry",
    "shorten short tiny",
    "http api endpoint rest",
    "browser tab",
    "click press tap",
    "button element control",
    "type enter input fill",
    "form field",
    "wait pause until sleep",
    "= js javascript",
    "javascript script",
    "key keyboard keystroke hotkey",
    "accessibility aria dom",
    // Data and infrastructure.
    "= db database",
    "database sql table schema postgres postgresql mysql sqlite",
    "column field attribute",
    "slow performance plan optimize",
    "backup dump snapshot",
    "export dump",
    "csv comma+separated",
    "spreadsheet sheet workbook excel xlsx",
    "cell range",
    "chart graph plot diagram visualize",
    "row record entry",
    "cache redis key+value",
    "container docker",
    "= k8s kubernetes",
    "kubernetes kubectl cluster pod deployment",
    "replica instance scale",
    "deploy release ship rollout go+live",
    "shell terminal command bash cli",
    "bucket storage blob object",
    "temporary presigned expiring",
    "wiki page doc knowledge+base",
    "note memo jot",
    "todo task checklist chore",
    "sprint cycle iteration milestone",
    "assign assignee owner",
    "priority urgency importance",
    "worklog time+spent log+time timesheet",
    "transition status workflow state",
    "memory remember memorize recall knowledge",
    "entity node",
    "relation relationship connection",
    "observation fact",
    // Short forms people type: shell commands and common abbreviations.
    "= ls list+directory list+files",
    "= mv move+file",
    "= cp copy+file",
    "= rm delete+file remove+file",
    "= mkdir create+directory make+directory",
    "= pwd current+directory",
    "= cmd command",
    "= msg message",
    "= cfg configuration conf config",
    "= env environment",
    "= docs documentation",
    "= md markdown",
    "= err error",
    "= org organization",
    "= img image",
    "= pic picture",
    "= auth authentication",
    "= pkg package",
    "= deps dependencies",
    "= perf performance",
    "= ns namespace",
    "= svc service",
    "= gh github",
    "= tix tickets",
    "= desc description",
    "= addr address",
    "= num number",
    "= info information",
];

/// Terms a word or phrase expands to, with their weights.
type Expansions = Vec<(String, f64)>;

/// Source words and phrases and what each expands to.
#[derive(Debug, Default)]
pub(crate) struct Thesaurus {
    words: HashMap<String, Expansions>,
    /// A phrase's stemmed words, and its expansions.
    phrases: Vec<(Vec<String>, Expansions)>,
}

fn stemmed(word: &str) -> String {
    let mut s = word.to_lowercase();
    stem_in_place(&mut s);
    s
}

/// A `+`-joined member: its stemmed words, stopwords kept (for matching phrases).
fn member_words(member: &str) -> Vec<String> {
    member
        .split('+')
        .filter(|w| !w.is_empty())
        .map(stemmed)
        .collect()
}

/// The terms a member contributes as a target: its stemmed words without stopwords.
fn member_terms(member: &str) -> Vec<String> {
    member
        .split('+')
        .filter(|w| !w.is_empty() && !is_stopword(&w.to_lowercase()))
        .map(stemmed)
        .collect()
}

impl Thesaurus {
    fn build() -> Self {
        let mut thesaurus = Self::default();
        for line in GROUPS {
            let (weight, line) = match line.strip_prefix("= ") {
                Some(rest) => (SAME, rest),
                None => (RELATED, *line),
            };
            let (sources, targets): (Vec<&str>, Vec<&str>) = match line.split_once(" > ") {
                Some((left, right)) => (
                    left.split_whitespace().collect(),
                    right.split_whitespace().collect(),
                ),
                None => {
                    let all: Vec<&str> = line.split_whitespace().collect();
                    (all.clone(), all)
                }
            };
            for source in &sources {
                let expansions: Vec<(String, f64)> = targets
                    .iter()
                    .filter(|t| *t != source)
                    .flat_map(|t| member_terms(t))
                    .map(|t| (t, weight))
                    .collect();
                let words = member_words(source);
                let list = match words.as_slice() {
                    [single] => thesaurus.words.entry(single.clone()).or_default(),
                    _ => {
                        thesaurus.phrases.push((words, Vec::new()));
                        match thesaurus.phrases.last_mut() {
                            Some(last) => &mut last.1,
                            None => continue,
                        }
                    }
                };
                for (term, w) in expansions {
                    match list.iter_mut().find(|(t, _)| *t == term) {
                        Some(entry) => entry.1 = entry.1.max(w),
                        None => list.push((term, w)),
                    }
                }
            }
        }
        thesaurus
    }

    /// The thesaurus, built once.
    pub(crate) fn get() -> &'static Self {
        static THESAURUS: OnceLock<Thesaurus> = OnceLock::new();
        THESAURUS.get_or_init(Self::build)
    }

    /// Calls `emit(group, term, weight)` for every expansion of the query: of each typed term
    /// (`group` is its index in `typed`), and of each phrase found in `sequence` (the query's
    /// stemmed words, stopwords kept; `group` is `typed.len()` plus the phrase's number).
    pub(crate) fn expand(
        &self,
        typed: &[(String, f64)],
        sequence: &[String],
        mut emit: impl FnMut(usize, &str, f64),
    ) {
        for (i, (term, _)) in typed.iter().enumerate() {
            for (t, w) in self.words.get(term).into_iter().flatten() {
                emit(i, t, *w);
            }
        }
        for (p, (phrase, expansions)) in self.phrases.iter().enumerate() {
            if sequence
                .windows(phrase.len())
                .any(|w| w == phrase.as_slice())
            {
                for (t, w) in expansions {
                    emit(typed.len() + p, t, *w);
                }
            }
        }
    }
}

/// Each shorter spelling of an `=` line, and the line's spelled-out form (its second member).
#[cfg(feature = "semantic")]
fn spellings() -> &'static HashMap<String, String> {
    static MAP: OnceLock<HashMap<String, String>> = OnceLock::new();
    MAP.get_or_init(|| {
        let mut map = HashMap::new();
        for line in GROUPS {
            let Some(rest) = line.strip_prefix("= ") else {
                continue;
            };
            let members: Vec<&str> = rest.split_whitespace().collect();
            let Some(long) = members.get(1) else {
                continue;
            };
            for m in &members {
                if m != long && !m.contains('+') && m.len() < long.len() {
                    map.insert((*m).to_owned(), long.replace('+', " "));
                }
            }
        }
        map
    })
}

/// `query` with each abbreviation of the thesaurus (`pr`, `ls`, `k8s`) spelled out (`pull
/// request`, `list directory`, `kubernetes`), for a model that reads words, not terms. A word
/// joined to another by `.`, `-`, `_` or `/` is part of a name (`next.js`, `k8s-dev`) and stays.
#[cfg(feature = "semantic")]
pub(crate) fn spell_out(query: &str) -> std::borrow::Cow<'_, str> {
    let map = spellings();
    let joins = |c: Option<char>| c.is_some_and(|c| matches!(c, '.' | '-' | '_' | '/'));
    let mut out = String::new();
    let mut copied = 0;
    let mut rest = query.char_indices().peekable();
    while let Some((start, c)) = rest.next() {
        if !c.is_alphanumeric() {
            continue;
        }
        let mut end = start + c.len_utf8();
        while let Some(&(i, c)) = rest.peek() {
            if !c.is_alphanumeric() {
                break;
            }
            end = i + c.len_utf8();
            rest.next();
        }
        let before = query[..start].chars().next_back();
        let after = query[end..].chars().next();
        if joins(before) || joins(after) {
            continue;
        }
        if let Some(long) = map.get(&query[start..end].to_lowercase()) {
            out.push_str(&query[copied..start]);
            out.push_str(long);
            copied = end;
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(query);
    }
    out.push_str(&query[copied..]);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expansions(typed: &[&str], sequence: &[&str]) -> Vec<(String, f64)> {
        let typed: Vec<(String, f64)> = typed.iter().map(|t| (stemmed(t), 1.0)).collect();
        let sequence: Vec<String> = sequence.iter().map(|t| stemmed(t)).collect();
        let mut out = Vec::new();
        Thesaurus::get().expand(&typed, &sequence, |_, t, w| out.push((t.to_owned(), w)));
        out
    }

    #[test]
    fn related_words_expand_both_ways() {
        assert!(expansions(&["folder"], &[]).contains(&("directori".to_owned(), RELATED)));
        assert!(expansions(&["directory"], &[]).contains(&("folder".to_owned(), RELATED)));
    }

    #[test]
    fn narrower_words_expand_only_to_their_topic() {
        assert!(expansions(&["japanese"], &[]).contains(&("languag".to_owned(), RELATED)));
        assert!(
            !expansions(&["language"], &[])
                .iter()
                .any(|(t, _)| t == "japanes")
        );
    }

    #[cfg(feature = "semantic")]
    #[test]
    fn abbreviations_are_spelled_out_for_the_model_but_names_keep_theirs() {
        assert_eq!(
            spell_out("open a PR for k8s"),
            "open a pull request for kubernetes"
        );
        assert_eq!(
            spell_out("ls the repo, then mv it"),
            "list directory the repo, then move file it"
        );
        assert_eq!(spell_out("lon and lat"), "longitude and latitude");
        assert_eq!(
            spell_out("docs for next.js and k8s-dev"),
            "documentation for next.js and k8s-dev"
        );
        assert!(matches!(
            spell_out("nothing to spell"),
            std::borrow::Cow::Borrowed(_)
        ));
        // The spelled-out form is the line's second member, whatever its length.
        assert_eq!(spell_out("cfg"), "configuration");
    }

    #[test]
    fn abbreviations_and_phrases() {
        let pr = expansions(&["pr"], &[]);
        assert!(pr.contains(&("pull".to_owned(), SAME)));
        assert!(pr.contains(&("request".to_owned(), SAME)));
        let look_up = expansions(&["look"], &["look", "up"]);
        assert!(look_up.iter().any(|(t, _)| t == "search"));
    }
}
