"""Cue phrases of team chat, per message category (the offline engine's Tier 1 rules).

Written from the labelling conventions (a commitment is a decision; a proposal, an opinion or
"leaning towards" is discussion), not from any one conversation.
"""

from __future__ import annotations

import re

_URL = re.compile(r"https?://\S+|www\.\S+")
_MENTION = re.compile(r"@[\w.\-]+")


def norm(text: str) -> str:
    """Lower-case, straight apostrophes, URLs replaced; what the cue patterns run on."""
    text = (text or "").replace("\u2019", "'").replace("\u2018", "'")
    return _URL.sub(" <url> ", text).lower()


def sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+|;\s+|\s+[—\u2013]\s+", text)
    return [p.strip() for p in parts if p and p.strip()]


def _any(patterns: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# --- decisions: the group commits -------------------------------------------------------------
DECISION = _any(
    [
        r"\blet'?s (go|roll) with\b",
        r"\b(we'?re|we are|we'?ll|i'?m) going with\b",
        r"^(ok|okay|right|so|fine)?[ ,]*going with\b",
        r"\bwe'?ll go with\b",
        r"\bgo(ing)? ahead with\b",
        r"(^|[.!:,] ?|\b(ok|okay|right|so|yes|yep|fine)[ ,]+)agreed\b(?! that it)",
        r"\b(it'?s|is) agreed\b",
        r"\bdecided\b",
        r"\bdecision( is|:| made)",
        r"\bfinal (call|answer|decision|numbers)\b",
        r"\bcalling it\b",
        r"\bfor the record\b",
        r"\bmake it official\b",
        r"\bnew (rule|policy|plan)\b",
        r"\bchange of plan\b",
        r"\bchanging the plan\b",
        r"\blet'?s (lock|fix|set|confirm)\b",
        r"(^|[,.:] ?|\b(ok|okay|yes|fine)[ ,]+)(approved|signed off)\b",
        r"\bsign(ed)? off on\b",
        r"\blet'?s (do it|do that|do this|make it so)\b",
        r"\b(fine|ok|okay|right|alright),? let'?s\b",
        r"^(ok|okay|right|so|yes|fine|alright)\b\s*[:\-—\u2013]",
        r"^(yes|yep|agreed|approved|confirmed)\s*[:\-—\u2013]",
        r"\b(scrap|halt|hold|pause|freeze|unfreeze|lift) (the|it|that|all|any)\b",
        r"\blet'?s (commit|plan on|plan for|settle on|lock)\b",
        r"\b(option|plan|version|choice) [a-z0-9]+ it is\b",
        r"\bnot negotiable\b",
        r"\bconfirming\b",
        r"\bno longer\b",
        r"\b(is|are|stays?) (frozen|locked( in)?|out|off the table)\b",
        r"\b(date|plan|decision)'?s? (is )?locked\b",
        r"\b(freeze|ban) (is )?(lifted|over|on)\b",
        r"\blifted\b",
        r"\bwe'?re (making|dropping|keeping|moving|switching|going ahead|not doing|not going)\b",
        r"\bgo for (it|prod|production|launch|the)\b",
        r"\bgreen ?light\b",
        r"\bis a (no|yes|go|no-go)\b",
        r"\bstays? (reimbursable|as is|in place|the same|on)\b",
        r"\bno more\b.*\b(from now|going forward|as of)\b",
        r"\b(from now on|going forward|as of (today|now|monday|next))\b",
        r"\bcomfortable (taking|going|with)\b",
    ]
)
# "let's <verb>" is the team's imperative; only commitment verbs, not "let's chat/see/discuss".
LETS = re.compile(
    r"\blet'?s (not |just |also |keep |stick |go |do |use |ship |move |take |drop |give |run |send |cut |skip |park "
    r"|make |switch |stay |push |pull |roll |cap |limit |hold |revert |renew |raise |lower |add |remove |start "
    r"|stop |pick |choose |book |offer |accept |reject |pay |set |launch |delay |postpone |extend |split )"
)
PROPOSAL = _any(
    [
        r"\bwhat if\b",
        r"\bmaybe (we|i|it|let'?s)\b",
        r"\bi'?d (suggest|propose|rather|prefer|lean|go|say|vote|recommend)\b",
        r"\bi (suggest|propose|recommend|vote)\b",
        r"\bhow about\b",
        r"\bwhy don'?t we\b",
        r"\b(could|should|shall|can) we\b",
        r"\bwe (could|should|might)\b",
        r"\bproposal\b",
        r"\bleaning (towards|toward|to)\b",
        r"\boption [a-z0-9]\b",
        r"\bmy (vote|preference|suggestion)\b",
        r"\bwhat about\b",
    ]
)
HEDGE = _any(
    [
        r"\bleaning\b",
        r"\bmaybe\b",
        r"\bperhaps\b",
        r"\bi think\b",
        r"\bi'?d\b",
        r"\bmight\b",
        r"\bnot sure\b",
        r"\bwhat if\b",
        r"\bshould we\b",
        r"\bshall we\b",
        r"\bcould we\b",
        r"\bdo we\b",
        r"\bif we\b",
        r"\bwho decided\b",
        r"\bwhat did we decide\b",
        r"\bhave we decided\b",
        r"\bas agreed\b",
        r"\bwe agreed\b",
        r"\balready (agreed|decided)\b",
        r"\bdecided yet\b",
    ]
)
# A question about the team's own course ("are we migrating all of it?", "X or Y?", "Looker ok?"), which a
# settling answer turns into a decision; asking what is known ("do we know why…") is not one.
COURSE_QUESTION = _any(
    [
        r"\b(are|do|should|shall|will) we\b(?! (know|have any idea|even know|still))",
        r"\bin scope\b",
        r"\b(ok|okay|fine|enough)( (for|with) [\w ]{1,24})?\s*\?",
        r"\bor (just|only|also)\b",
        r"\bor [^?]{1,60}\?",
    ]
)
# The answer settles it: a yes/no opener with content, or a rule-shaped statement.
SETTLING_OPENER = re.compile(r"^(yes|yep|yeah|no|nope)\b\s*[,.:;!\u2014\u2013-]+\s*(?=\S+\s+\S+)")
SETTLING_RULE = _any(
    [
        r"\bonly\b",
        r"\b(yes|no)[.!]?$",
        r"\b(yes|no)\s*[.!]\s",
        r"(\w'?s|\bis|\bare) (fine|ok|okay|plenty|enough)\b",
        r"\b(held|kept|stays?) (flat|as is|the same)\b",
        r"\bno new [\w -]{1,40} without\b",
        r"\b(follows|moves|slips) (in|to) (q[1-4]|\w+ \d{1,2}|\d{1,2} \w+)\b",
        r"\ball of (it|them)\b|\bnone of (it|them)\b",
    ]
)
# Doubt or conditions in an answer leave the question open.
OPEN_ANSWER = _any(
    [
        r"\bif\b",
        r"\bunless\b",
        r"\bimo\b",
        r"\btbh\b",
        r"\bafaik\b",
        r"\bprobably\b",
        r"\bi feel\b|\bfeels (right|like|good|ok)\b",
        r"\b(looks|seems|sounds) like\b",
    ]
)
# The asker's own course ("can I just…?") is theirs to settle, not the team's.
ASKER_COURSE = re.compile(r"\b(can|could|should|shall|do) i\b")
# Approval of someone else's proposal by a short reply: a decision when it follows a proposal.
APPROVAL = _any(
    [
        r"^(ok|okay|yes|yep|yeah|sure|fine|right)?[ ,.!—\u2013-]*(happy|approved|go for it|go ahead|ship it"
        r"|let'?s do it|do it|sounds good,? let'?s|makes sense,? let'?s|agreed|signed off|green ?light|fine,? go)",
        r"^(yes|yep|yeah),? (happy|approved|agreed|let'?s)",
        r"\bhappy with (that|this|it)\b(?!\?)",
        r"\bapproved\b",
    ]
)
# Agreement that adds a voice to a decision already made ("👍 works for me", "+1").
AGREEMENT = _any(
    [
        r"\bworks for (me|us|product|\w+)\b",
        r"^\+1\b",
        r"^\s*(👍|✅|💯|🙌)",
        r"\bfine by me\b",
        r"\bsounds good\b",
        r"\bmakes sense\b",
        r"\b(yes|yep|yeah),? happy\b",
        r"\bagreed\b",
        r"\bsupport (this|that)\b",
        r"\bno objections?\b",
    ]
)

# --- actions: someone commits to, or is asked for, a defined task ------------------------------
SELF_COMMIT = _any(
    [
        r"\bi'?ll (?!be (out|off|away|back|in|around|late|honest)|need|let you know|admit|say|bet|keep that in mind"
        r"|try to remember|believe|assume|check back)\w+",
        r"\bi will (?!be (out|off|away|back|in|around))\w+",
        r"\bi can (take|do|grab|pick|handle|own|cover|look|sort|write|set|send|run|draft|own|ask|chase|update|fix)\b",
        r"\bi'?m on it\b",
        r"(^|[^a-z])on it\b",
        r"\bwill do\b",
        r"\bleave it with me\b",
        r"\bi'?ve got (it|this|that)\b",
        r"\bi'?m (taking|picking up|grabbing|on) (this|that|it|the)\b",
        r"\bi'?ll take\b",
        r"\bmine\b(?=[.!]?$)",
        r"\bi'?m going to (?!be)\w+",
        r"\bme on (the|comms|it)\b",
    ]
)
REQUEST = _any(
    [
        r"\b(can|could|would) you\b(?! (see|hear|believe|imagine|remember|tell if))",
        r"\bcan i ask you to\b",
        r"\bplease (?!do let me know)\w+",
        r"\bpls \w+",
        r"\byou (own|take|have|handle|drive|lead|do) (it|this|that|the|comms|point)\b",
        r"\byou own\b",
        r"\bowns? (it|this|that|the|setting|getting)\b",
        r"\byou'?re (on|up|owning)\b",
        r"\bare you (ok|okay|able|happy) to\b",
        r"\byou right to\b",
        r"\bneed (you|someone) to\b",
        r"\bwould you mind\b",
        r"\bmind (taking|doing|looking)\b",
    ]
)
# Someone offers to do a task; a reply accepting the offer makes it theirs.
OFFER = re.compile(
    r"\b(?:i can|i could|happy to|glad to|do you want me to|want me to|shall i|should i|i'?m happy to)\s+"
    r"(?!not\b|see\b|tell\b|imagine\b|believe\b)(?=[a-z])",
    re.IGNORECASE,
)
ACCEPT = re.compile(
    r"^(?:(?:yes|yep|yeah|ok|okay|sure|great|perfect|amazing|oh)\b[\s,.!]*)*"
    r"(?:please\b|yes please\b|go for it\b|please do\b|that'?d be (?:great|amazing|brilliant)\b)"
)
ACK = re.compile(
    r"^\s*(yep|yes|yeah|yup|sure|ok|okay|will do|on it|done deal|can do|no problem|no worries|np|sounds good|"
    r"got it|roger|ack|absolutely|of course|happy to|👍|👌|✅|🙏|💪|🫡)\b|^\s*(👍|👌|🫡|💪|✅)"
)
COMPLETION = _any(
    [
        r"\b(done|merged|deployed|shipped|fixed|sent|posted|finished|completed|rolled out|booked|exported|configured"
        r"|renewed|pinned|rotated|submitted|published|resolved|sorted|signed|uploaded|scheduled|updated|set up"
        r"|is out|went out|is live|are live|live now|now live)\b",
        r"✅",
        r"\bpr (is )?up\b",
    ]
)

# --- other categories ---------------------------------------------------------------------------
BLOCKER = _any(
    [
        r"\bblocked\b",
        r"\bblocking\b",
        r"\bblocker\b",
        r"\bcan'?t \w+.*\buntil\b",
        r"\bcannot \w+.*\buntil\b",
        r"\bwaiting (on|for) (?!you)",
        r"\bstuck (on|with)\b",
        r"\bno access\b",
        r"\bdon'?t have (write |read |admin )?access\b",
        r"\bheld up\b",
        # Something broke or refuses to proceed: failures, rejections, hard limits met.
        r"\bcan'?t [^.?!]{0,40}\bwithout\b",
        r"\bcan'?t get (onto|into|in to|access)\b",
        r"\bcan'?t (start|begin|ship|deploy|launch|release|merge|proceed) (before|until)\b",
        r"\b(is|are|keeps?|kept) (failing|crashing|timing out)\b",
        r"\bfailed again\b",
        r"\bkeeps? getting\b",
        r"^rejected\b|\b(got|was|were|been) rejected\b",
        r"\b(we'?re|i'?m|they'?re|are|is) stuck\b",
        r"^(problem|snag|issue|blocker)\s*:",
        r"\b(will|that'?ll|it'?ll|this'?ll) break\b",
    ]
)
UPDATE = _any(
    [
        COMPLETION.pattern,
        r"\b(fyi|update|status|heads up|heads-up)\b",
        r"\bheard back\b",
        r"\b(is|are) (now|still|in progress)\b",
        r"\bprogress\b",
        r"\bslipped\b",
        r"\bfound it\b",
        r"\bconfirmed\b",
        r"\blooks (good|fine)\b",
        r"\blgtm\b",
        r"\bnot yet\b",
        r"\bstill (looking|working|waiting)\b",
        r"\b\d+(\.\d+)?%",
    ]
)
REFERENCE = _any(
    [r"<url>", r"\b[a-z]{2,6}-\d{2,6}\b", r"\b(doc|docs|link|runbook|wiki|spreadsheet|sheet|notion|ticket)\b"]
)
CONCERN = _any(
    [
        r"\b(worried|concern(ed)?|risk(y)?|nervous|careful|twitchy|not comfortable|uneasy|afraid|dangerous)\b",
        r"\bwhat happens if\b",
    ]
)
QUESTION_START = re.compile(
    r"^(who|what|when|where|why|how|which|do|does|did|is|are|was|were|can|could|should|shall|will|would|have|has|any)\b"
)
ROUTINE = _any(
    [
        r"^(good )?(morning|afternoon|evening|hi|hello|hey|hiya|yo)\b",
        r"^(thanks|thank you|ta|cheers|thx|nice|great|cool|noted|lol|haha|ha|nice one|brilliant|perfect|awesome)\b",
        r"^\+1$",
        r"^(ok|okay|kk|k)[.!]?$",
        r"\b(have a good|enjoy|see you|bye|good night|weekend)\b",
        r"\b(lol|haha|😂|🤣)\b",
    ]
)
CONTROL_COMMAND = re.compile(
    r"\b(pause|step out|resume|come back|unpause|secure mode|ears (off|on)|status|context( type| tags| stakeholders"
    r"| related)?\s*:|help|dismiss)\b"
)
PAUSE_COMMAND = re.compile(r"\b(pause|step out|secure mode(?! off)|ears off)\b")
RESUME_COMMAND = re.compile(r"\b(resume|come back|unpause|secure mode off|ears on)\b")
