"""Deterministic generator for the tokenizer test corpora.

Everything here is synthetic: the word lists, character lists and templates
are written in this file, and all randomness comes from ``random.Random(seed)``
instances (never the global random state, never the iteration order of sets),
so the output is byte-identical on every run and every machine.

Files written by ``main()`` (paths relative to the repository root):

- ``tests/fixtures/english.txt``     ~133 KB English-like stories, ``<|endoftext|>``-separated
- ``tests/fixtures/german.txt``      ~20 KB German-like text with umlauts and ß
- ``tests/fixtures/chinese.txt``     ~10 KB five/seven-character quatrains
- ``tests/fixtures/emoji_chat.txt``  ~10 KB emoji-heavy chat (ZWJ, skin tones, flags)
- ``tests/fixtures/code.txt``        ~20 KB Python-ish and C-ish snippets (tabs, ``\\r\\n``)
- ``cs336_basics/data/sample.txt``   ~300 KB English-like stories (default ``bpe train`` input)

Tests can also call ``english_text(n_bytes, seed)`` to make larger corpora on the fly.

Regenerate with::

    uv run python tests/make_fixtures.py
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from itertools import accumulate
from pathlib import Path

EOT = "<|endoftext|>"

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
PACKAGE_DATA = ROOT / "cs336_basics" / "data"


# --------------------------------------------------------------------------- helpers


class Zipf:
    """Picks items with probability proportional to 1 / rank**s (first item = rank 1)."""

    def __init__(self, items: Sequence, s: float = 1.0) -> None:
        self.items = list(items)
        self.cum_weights = list(
            accumulate(1.0 / (rank**s) for rank in range(1, len(self.items) + 1))
        )

    def pick(self, rng: random.Random):
        return rng.choices(self.items, cum_weights=self.cum_weights)[0]


_SLOT = re.compile(r"\{(\w+)\}")


def expand(template: str, slots: dict[str, Callable[[], str]]) -> str:
    """Replace every ``{name}`` in ``template`` by ``slots[name]()``.

    A slot whose name is missing but whose lowercase form exists is filled from
    the lowercase slot and capitalised (``{Time}`` -> "That morning").
    """

    def fill(match: re.Match) -> str:
        name = match.group(1)
        if name in slots:
            return slots[name]()
        value = slots[name.lower()]()
        return value[:1].upper() + value[1:]

    return _SLOT.sub(fill, template)


def fill_to_size(
    n_bytes: int, make_chunk: Callable[[], str], separator: Callable[[], str]
) -> str:
    """Join chunks from ``make_chunk`` until the UTF-8 size reaches ``n_bytes``."""
    parts: list[str] = []
    size = 0
    while size < n_bytes:
        if parts:
            sep = separator()
            parts.append(sep)
            size += len(sep.encode("utf-8"))
        chunk = make_chunk()
        parts.append(chunk)
        size += len(chunk.encode("utf-8"))
    return "".join(parts)


def _words(text: str) -> list[str]:
    """Whitespace-separated words of a string, in order."""
    return text.split()


def _phrases(text: str) -> list[str]:
    """Items of a block separated by newlines or ``|``, stripped, empty ones dropped."""
    return [item.strip() for item in re.split(r"[|\n]", text) if item.strip()]


def _pairs(text: str) -> list[tuple[str, str]]:
    """Whitespace-separated words taken two at a time."""
    words = text.split()
    return list(zip(words[::2], words[1::2]))


# --------------------------------------------------------------------------- English

# Women and men alternate; the Zipf weighting makes the first few names the most common.
_EN_WOMEN = _phrases("""
    Mara | Nell | Ada | Ruth | Elena | Priya | June | Hana | Tess | Iris | Greta
    Nora | Wren | Clara | Mrs. Patel | Dr. Reyes | Aunt Lottie
""")
_EN_MEN = _phrases("""
    Tom | Sam | Leo | Omar | Felix | Hugo | Arjun | Milo | Jonah | Theo | Kenji
    Pablo | Ezra | Owen | Mr. Abbott | Uncle Bram | Captain Hale
""")
# (name, subject pronoun, possessive, object pronoun)
EN_PEOPLE = [
    person
    for woman, man in zip(_EN_WOMEN, _EN_MEN, strict=True)
    for person in ((woman, "she", "her", "her"), (man, "he", "his", "him"))
]

EN_TOWNS = _phrases("""
    Millbrook | Port Ellery | Ashford | Greyhaven | Little Orton | Kestrel Bay
    Dunmore | Willowmere | East Halden | Saltcombe | Brackenridge | Fennick
""")

EN_PLACES = _phrases("""
    the kitchen | the garden | the market | the harbor | the school | the library
    the bakery | the river | the old mill | the train station | the village square
    the post office | the lighthouse | the forest | the bridge | the beach
    the farm | the museum | the attic | the hill behind the house | the corner shop
    the playground | the hospital | the town hall | the bus stop | the orchard
    the boathouse | the cellar
""")

# Rough frequency order: earlier words are picked more often.
EN_NOUNS = _words("""
    dog box house letter cat key book door window boat
    map coat lamp cake bag road tree bird chair table
    hat ball clock bottle basket garden ticket picture bicycle kite
    apple shoe cup plate candle rope ladder blanket pencil notebook
    umbrella radio jar coin button ribbon scarf bench fence gate
    bucket shell stone feather wagon horse goat rabbit fox owl
    kettle spoon pie sandwich lantern mirror drawer envelope stamp puzzle
    violin drum piano flag tent nest pebble leaf flower jacket
    parcel recipe sign photograph compass telescope shovel hammer nail brush
    bowl pillow sweater glove sock boot helmet whistle trumpet carrot
    potato onion lemon cherry biscuit muffin pancake pumpkin turnip melon
""")

EN_ADJECTIVES = _words("""
    old little big new red small blue long green quiet
    strange heavy bright warm cold yellow broken tiny wet dusty
    shiny wooden empty lucky clever funny gentle noisy sleepy brave
    hungry careful golden secret rusty crooked soft huge muddy silver
    purple striped round narrow enormous curious patient grumpy cheerful ancient
""")

# (base form, past tense) of verbs that take an object.
EN_VERBS = _pairs("""
    find found      open opened     carry carried   see saw         take took
    hold held       fix fixed       bring brought   buy bought      lose lost
    paint painted   sell sold       build built     hide hid        watch watched
    clean cleaned   read read       drop dropped    move moved      keep kept
    check checked   count counted   pack packed     wrap wrapped    follow followed
    borrow borrowed return returned share shared    catch caught    push pushed
    pull pulled     fold folded     mend mended     measure measured forget forgot
    notice noticed  polish polished bury buried     chase chased    weigh weighed
""")

# (base form, past tense) of verbs without an object.
EN_INTRANSITIVE = _pairs("""
    walk walked     run ran         wait waited     laugh laughed   smile smiled
    sleep slept     sing sang       shout shouted   listen listened stay stayed
    sit sat         stand stood     climb climbed   swim swam       dance danced
    whisper whispered hurry hurried rest rested     work worked     wander wandered
""")

EN_ADVERBS = _words("""
    slowly quickly quietly carefully suddenly finally happily gently almost nearly
    really loudly softly proudly patiently secretly eagerly calmly barely politely
""")

EN_TIMES = _phrases("""
    that morning | the next day | after lunch | before dinner | on Monday | at dawn
    in the evening | later that week | on Saturday | one rainy afternoon
    at midnight | the following spring | by noon | early on Sunday | last winter
    that night
""")

EN_FEELINGS = _words("""
    happy tired worried excited nervous proud surprised
    sad hopeful confused relieved grateful cross amazed
""")

EN_JOBS = _words("""
    baker teacher fisherman shopkeeper doctor farmer
    postman librarian captain gardener carpenter painter
""")

EN_WEATHER = _phrases("""
    It was raining again. | The sun was low and orange.
    A cold wind came off the sea. | Snow had fallen in the night.
    It was the hottest day of the year. | Fog hung over the fields.
    The sky was clear and very blue. | Thunder rolled somewhere far away.
""")

EN_NUMBER_WORDS = _words("two three four five six seven eight nine ten twelve twenty")

EN_OPENERS = [
    "Once upon a time, there was {a_adj_n} named {A}.",
    "{A} lived in {town} with {apos} {adj} {n}.",
    "In {year}, {A} moved to {town}.",
    "Every summer, {A} and {B} visited {town}.",
    "Nobody in {town} had ever seen {a_adj_n} like the one {A} found.",
    "{A} was {age} years old when {ap} first saw {P}.",
    "There was once a {job} in {town} called {A}.",
    "It all started with {a_n}.",
    "{Time}, {A} woke up early.",
    "The {n} had been in {P} since {year}.",
]

EN_NARRATIVE = [
    "{A} {vt} the {adj} {n} and put it in {P}.",
    "{Time}, {A} and {B} walked to {place}.",
    "{Ap} {adv} {vi} near {place}.",
    "The {n} was {adj}, but {A} didn't mind.",
    "{B} {vt} {a_adj_n} under the {n}.",
    "When {A} got to {P}, the {n} was gone.",
    "{A} looked at the {n} for a long time.",
    "There were {count} {ns} in {P}, and every one of them was {adj}.",
    "{B} said {bp}'d {vb} the {n} {time}.",
    "{A} felt {feel}; {ap} hadn't expected that.",
    "{Ap} wasn't sure, so {ap} asked {B}.",
    "{B} laughed, and {A} {adv} {vi}.",
    "The {job} {vt} {a_n} and gave it to {A}.",
    "It cost {price}, which was more than {A} had.",
    "By {year}, the {n} was famous all over {town}.",
    "{A} counted {count} {ns} (and one {adj} {n}) before giving up.",
    "The {adj} {n} -- the one from {P} -- was still there.",
    "{B} {vi} all the way to {place}.",
    "{Ap} {vt} {apos} {n}, then {vt} the {n} too.",
    "Without a word, {B} {vt} the {n}.",
    "{A}'s {n} was {adj} and {adj}.",
    "{A} and {B} {vi} until it got dark.",
    "After that, nobody {vt} the {n} again.",
    "The {ns} were {adj} and smelled of {ns}.",
    "{B}, who was {feel}, {vt} the {adj} {n}.",
    "{A} had {count} {ns}; {B} had only {numword}.",
    "{C} came by at {clock} with {a_adj_n}.",
    "{C} was the {job} at {P}, and {cp} knew everything about {ns}.",
    "{A} tried to {vb} the {n}, but it was too {adj}.",
    "Then {A} saw it: {a_adj_n}, half hidden behind the {n}.",
    "{weather}",
    "{Ap} {adv} {vt} the {n} — and then {ap} {vi}.",
    "Nearly {percent} of the {ns} in {town} were {adj}.",
    "{A} wrote {count} letters that year (most of them to {B}).",
    "Was it {adj}? Was it {adj}? {A} couldn't tell.",
    "{B} thought the {n} was {adj}, and {A} agreed.",
    "Somewhere near {place}, {a_n} {vi}.",
    "{A} {vt} the {n} at {clock} sharp.",
    "{Ap} had never seen {a_adj_n} before!",
    "It took {numword} hours to {vb} all the {ns}.",
]

EN_DIALOGUE = [
    "\"I'm not sure we'll find the {n} before {time},\" {A} said.",
    '"Don\'t touch that {n}!" {B} shouted.',
    '"It\'s {price} for {numword} {ns}," said the {job}.',
    '"You\'re late again," {B} told {A}. "Where\'ve you been?"',
    '"They\'ve closed {place}," said {C}. "We\'ll have to go around."',
    '"Can we {vb} the {n}?" asked {A}.',
    '"I don\'t know," said {B}. "Maybe it\'s in {P}."',
    '"Well," {A} said {adv}, "that\'s a very {adj} {n}."',
    '"Who {vt} my {n}?" {B} asked.',
    '"We\'ve got {count} {ns} and no {n}," {A} sighed.',
    '"I\'d {vb} it if I were you," said {C}.',
    '"Isn\'t it {adj}?" {A} whispered.',
    '"Look!" said {B}. "There\'s {a_adj_n} on the {n}!"',
    '"I\'m {feel}," {A} admitted. "I really am."',
    "{A} said {ap}'d help, and {B} said {bp}'d bring the {n}.",
    '"She\'d never {vb} the {n}," said {B}. "Not in a million years."',
    '"What\'s the {n} for?" asked {C}.',
    '"It\'s been here since {year}," the {job} said.',
    '"You\'ll see," said {A}. "It won\'t take long."',
    '"Let\'s {vb} the {ns} first," said {B}, "and then we\'ll {vi}."',
    '"How much is it?" "{Price}." "That\'s far too much!"',
]

EN_CLOSERS = [
    "And that was the end of the {adj} {n}.",
    "{A} never forgot that day.",
    "In the end, everyone was {feel}.",
    "They still talk about it in {town}.",
    "The {n} is still in {P}, if you want to see it.",
    "{A} and {B} went home, {feel} and {adj}.",
    "From then on, {A} kept the {n} safe.",
    "The End.",
]


def _en_article(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _en_plural(noun: str) -> str:
    if noun.endswith(("s", "x", "ch", "sh")) or noun == "potato":
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun == "leaf":
        return "leaves"
    return noun + "s"


_NOUNS = Zipf(EN_NOUNS)
_ADJECTIVES = Zipf(EN_ADJECTIVES)
_VERBS = Zipf(EN_VERBS)
_INTRANSITIVE = Zipf(EN_INTRANSITIVE)
_ADVERBS = Zipf(EN_ADVERBS)
_PLACES = Zipf(EN_PLACES)
_PEOPLE = Zipf(EN_PEOPLE, s=0.7)
_TOWNS = Zipf(EN_TOWNS)
_NARRATIVE = Zipf(EN_NARRATIVE, s=0.5)
_DIALOGUE = Zipf(EN_DIALOGUE, s=0.5)


def _count(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.6:
        return str(rng.randint(2, 20))
    if roll < 0.9:
        return str(rng.randint(21, 999))
    return f"{rng.randint(1000, 250000):,}"


def _english_document(rng: random.Random) -> str:
    """One short story: an opening, a few paragraphs, usually a closing line."""
    cast = []
    while len(cast) < 3:
        person = _PEOPLE.pick(rng)
        if person not in cast:
            cast.append(person)
    main_place = _PLACES.pick(rng)
    town = _TOWNS.pick(rng)

    slots: dict[str, Callable[[], str]] = {
        "P": lambda: main_place,
        "town": lambda: town,
        "n": lambda: _NOUNS.pick(rng),
        "ns": lambda: _en_plural(_NOUNS.pick(rng)),
        "adj": lambda: _ADJECTIVES.pick(rng),
        "a_n": lambda: _en_article(_NOUNS.pick(rng)),
        "a_adj_n": lambda: _en_article(f"{_ADJECTIVES.pick(rng)} {_NOUNS.pick(rng)}"),
        "vt": lambda: _VERBS.pick(rng)[1],
        "vb": lambda: _VERBS.pick(rng)[0],
        "vi": lambda: _INTRANSITIVE.pick(rng)[1],
        "adv": lambda: _ADVERBS.pick(rng),
        "place": lambda: _PLACES.pick(rng),
        "time": lambda: rng.choice(EN_TIMES),
        "feel": lambda: rng.choice(EN_FEELINGS),
        "job": lambda: rng.choice(EN_JOBS),
        "weather": lambda: rng.choice(EN_WEATHER),
        "numword": lambda: rng.choice(EN_NUMBER_WORDS),
        "count": lambda: _count(rng),
        "year": lambda: str(rng.randint(1890, 2024)),
        "age": lambda: str(rng.randint(6, 90)),
        "price": lambda: (
            f"${rng.randint(0, 40)}.{rng.choice(['00', '50', '25', '99', '75', '10'])}"
        ),
        "clock": lambda: f"{rng.randint(1, 12)}:{rng.choice(['00', '15', '30', '45'])}",
        "percent": lambda: f"{rng.randint(2, 98)}%",
    }
    for letter, (name, subj, poss, obj) in zip("abc", cast):
        slots[letter.upper()] = lambda name=name: name
        slots[letter + "p"] = lambda subj=subj: subj
        slots[letter + "pos"] = lambda poss=poss: poss
        slots[letter + "obj"] = lambda obj=obj: obj

    def sentence() -> str:
        table = _DIALOGUE if rng.random() < 0.25 else _NARRATIVE
        return expand(table.pick(rng), slots)

    paragraphs = []
    for i in range(rng.randint(2, 5)):
        sentences = [sentence() for _ in range(rng.randint(2, 6))]
        if i == 0:
            sentences.insert(0, expand(rng.choice(EN_OPENERS), slots))
        space = "  " if rng.random() < 0.08 else " "
        paragraphs.append(space.join(sentences))
    if rng.random() < 0.7:
        paragraphs.append(expand(rng.choice(EN_CLOSERS), slots))
    return "\n\n".join(paragraphs)


def english_text(n_bytes: int, seed: int) -> str:
    """Return at least ``n_bytes`` (UTF-8) of English-like stories separated by ``<|endoftext|>``.

    Deterministic for a given seed. Documents are generated directly and quickly
    (5 MB takes well under a second), so tests can build large corpora on the fly.
    """
    rng = random.Random(seed)
    return fill_to_size(
        n_bytes,
        lambda: _english_document(rng),
        lambda: "\n" + EOT if rng.random() < 0.3 else EOT,
    )


# --------------------------------------------------------------------------- German

DE_NAMES = _phrases("""
    Lena | Jonas | Jürgen | Käthe | Björn | Sören | Anna | Lukas | Jörg | Hannah
    Frau Schröder | Herr Müller | Frau Köhler | Herr Bäumer | Opa Günther
    Tante Jülchen
""")

DE_TO_PLACES = _phrases("""
    zur Bäckerei | über die Brücke | nach Hause | zum Bahnhof | durch den Wald
    in die Küche | zum Marktplatz | nach München | an den See | zur Schule
    ins Büro | zum Rathaus | in die Stadt | auf den Hügel | nach Österreich
""")

DE_AT_PLACES = _phrases("""
    in der Bäckerei | am Fluss | auf dem Marktplatz | in der Küche | im Garten
    an der Brücke | in Köln | am Bahnhof | im Büro | auf der Straße | im Dorf
    in Lübeck | an der Ostsee | im Schloss | vor dem Geschäft | hinter der Mühle
""")

DE_OBJECTS = _phrases("""
    den Schlüssel | die Äpfel | das Fahrrad | den Brief | die Tür | die Tüte
    den Käse | die Brötchen | das Buch | den Löffel | die Blumen | den Kühlschrank
    die Zeitung | das Geschenk | den Kuchen | die Brille | den Hut | die Schuhe
    das Glas | den Korb | die Lampe | das Spielzeug | den Mantel | die Karte
""")

DE_VERBS = _words("""
    kaufte fand öffnete trug suchte vergaß schloss holte
    zählte prüfte verlor versteckte reparierte wählte brachte bemerkte
""")

DE_ADJECTIVES = _words("""
    schön groß müde fröhlich grün süß heiß kühl schwierig spät
    früh ruhig glücklich traurig böse lustig dunkel hübsch klug mürrisch
""")

DE_PLURALS = _words("""
    Äpfeln Blumen Vögeln Häusern Bäumen Kindern Füchsen
    Büchern Stühlen Körben Brötchen Hühnern Flüssen Türmen
""")

DE_DAYS = _words("Montag Dienstag Mittwoch Donnerstag Freitag Samstag Sonntag")

DE_FOOD = _phrases("""
    Brötchen mit Käse | Äpfel | Kartoffelsalat | Kuchen | Würstchen | Suppe | Knödel
    Spätzle
""")
DE_DRINKS = _phrases("""
    Kaffee | Tee | Apfelsaft | heiße Schokolade | Wasser | Milch
""")

DE_SAYINGS = _phrases("""
    Das ist aber schön | Ich weiß es nicht | Wir müssen uns beeilen
    Das ist zu groß für mich | Heute ist es furchtbar heiß
    Ich hätte gern noch ein Stück | Das gehört mir nicht | Übermorgen fahren wir weg
    Außerdem ist es schon spät | Es tut mir leid
""")
DE_QUESTIONS = _phrases("""
    Hast du die Schlüssel gesehen? | Wo ist denn die Straßenbahn? | Wie spät ist es?
    Möchtest du noch Tee? | Warum bist du so müde? | Wer hat das gemacht?
    Können wir gehen?
""")

DE_SENTENCES = [
    "{Name} ging {to}.",
    "Am {day} {verb} {Name} {obj} {at}.",
    "„{saying}“, sagte {Name}.",
    "„{question}“, fragte {Name}.",
    "Es war {adj}, und {Name} war {adj}.",
    "Die Straße war {adj} und voller {plural}.",
    "Weil es regnete, blieb {Name} {at}.",
    "Danach aßen sie {food} und tranken {drink}.",
    "Der Preis betrug {euro} €, was {Name} zu teuer fand.",
    "{Name} {verb} {obj} und ging dann {to}.",
    "Übrigens hatte {Name} {obj} schon {at} gesehen.",
    "Im Jahr {year} wohnte {Name} {at}.",
    "Um {hour} Uhr kam {Name} {to} zurück.",
    "Außerdem gab es {count} Stück Kuchen für alle.",
    "{Name} und {Name} saßen {at} und lachten.",
    "Das Wetter war {adj}, die Luft roch nach {plural}.",
    "Plötzlich hörte {Name} ein Geräusch {at}.",
    "Später fuhren alle gemeinsam {to}.",
]


def _german_document(rng: random.Random) -> str:
    slots: dict[str, Callable[[], str]] = {
        "name": lambda: rng.choice(DE_NAMES),
        "to": lambda: rng.choice(DE_TO_PLACES),
        "at": lambda: rng.choice(DE_AT_PLACES),
        "obj": lambda: rng.choice(DE_OBJECTS),
        "verb": lambda: rng.choice(DE_VERBS),
        "adj": lambda: rng.choice(DE_ADJECTIVES),
        "plural": lambda: rng.choice(DE_PLURALS),
        "day": lambda: rng.choice(DE_DAYS),
        "food": lambda: rng.choice(DE_FOOD),
        "drink": lambda: rng.choice(DE_DRINKS),
        "saying": lambda: rng.choice(DE_SAYINGS),
        "question": lambda: rng.choice(DE_QUESTIONS),
        "euro": lambda: f"{rng.randint(1, 30)},{rng.choice(['00', '50', '99', '20'])}",
        "year": lambda: str(rng.randint(1950, 2024)),
        "hour": lambda: str(rng.randint(6, 22)),
        "count": lambda: str(rng.randint(2, 24)),
    }
    paragraphs = []
    for _ in range(rng.randint(1, 3)):
        paragraphs.append(
            " ".join(
                expand(rng.choice(DE_SENTENCES), slots)
                for _ in range(rng.randint(2, 5))
            )
        )
    return "\n\n".join(paragraphs)


def german_text(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    return fill_to_size(n_bytes, lambda: _german_document(rng), lambda: EOT)


# --------------------------------------------------------------------------- Chinese

# Common characters, roughly most useful first (used with a Zipf weighting).
ZH_CHARS = "".join(
    dict.fromkeys(
        "山水风月花春秋日夜云天人心雨雪江河湖海鸟木林草石门家客酒歌声光明白红青黄绿长高远近古今年时"
        "来去归行飞落开生见听望思愁梦醉笑泪别离故乡城楼台桥舟船路马灯烟霜露寒暖清新老少千万一三五孤"
        "独半深空满西东南北上下中外前后小大多无有不可同相自在何处谁问知情意书琴剑松竹梅兰菊柳叶枝根"
        "流照映入出过回还起坐卧读吟醒眠静闲忙尽初晚早朝暮星辰波浪沙岸村野径田园"
    )
)
_ZH = Zipf(list(ZH_CHARS), s=0.6)


def _quatrain(rng: random.Random) -> str:
    width = rng.choice((5, 7))
    lines = []
    for i in range(4):
        verse = "".join(_ZH.pick(rng) for _ in range(width))
        lines.append(verse + ("，" if i % 2 == 0 else "。"))
    return "\n".join(lines) + "\n"


def chinese_text(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    return fill_to_size(n_bytes, lambda: _quatrain(rng), lambda: "\n")


# --------------------------------------------------------------------------- emoji chat

ZWJ = "\u200d"
SKIN_TONES = [chr(code) for code in range(0x1F3FB, 0x1F400)]

EMOJI_SIMPLE = _words("""
    😂 ❤️ 🎉 👍 😭 🔥 😊 🙏 😍 🥲 😅 🤔 👀 ✨ 💀
    🍕 ☕ 🌧️ 🚀 🐶 🐱 🎂 🥳 😴 🙈 💯 🤷 😬 🍺 ⚽
""")
EMOJI_SKINNABLE = _words("👍 👋 🙌 👏 💪 🤞 ✌ 🙋")
EMOJI_ZWJ = [
    ZWJ.join(["👩", "💻"]),  # woman technologist
    ZWJ.join(["👨", "🍳"]),  # man cook
    ZWJ.join(["👨", "👩", "👧", "👦"]),  # family
    ZWJ.join(["🏳️", "🌈"]),  # rainbow flag
    ZWJ.join(["🧑", "🚀"]),  # astronaut
    ZWJ.join(["🐻", "❄️"]),  # polar bear
    ZWJ.join(["❤️", "🔥"]),  # heart on fire
]
FLAG_COUNTRIES = _words("DE FR JP BR US UA IN CA IT ES KR NG")

CHAT_USERS = _words("alice bob carol dmitri zoë renée kai olga")

CHAT_MESSAGES = [
    "omg {e}{e} see you at {hour}pm {e}",
    "lol {e}",
    "running late, sorry {e}",
    "who's bringing snacks?? {e}{e}{e}",
    "meet at the café on {street} st {e}",
    "that's so naïve of him {e}",
    "{ru} {e}",
    "happy birthday!!! {e}{e}{e}{e}",
    "just landed {flag} {e}",
    "going to {flag} next week {flag}{flag}",
    "ok {skin}",
    "working from home today {zwj}",
    "dinner at mine? making crème brûlée {zwj} {e}",
    "can't stop laughing {e}{e}{e}{e}{e}",
    "brb",
    "{skin}{skin} great job everyone",
    "my résumé is finally done {e}",
    "{ru}, {ru}!",
    "the jalapeño pizza was 🔥🔥🔥",
    "no way {e} {zwj}",
    "tickets were €{hour}0 each {e}",
    "good night {e}",
    "{zwj}{zwj} team photo tomorrow",
    "piñata at the party?? {e}",
    "пошли в кино в {hour}? {e}",
]
CHAT_RUSSIAN = _words("привет спасибо да хорошо пока конечно ладно отлично ура")
CHAT_STREETS = ["Main", "Elm", "5th", "Mühlen", "Rue Cler"]


def _chat_line(rng: random.Random) -> str:
    slots: dict[str, Callable[[], str]] = {
        "e": lambda: rng.choice(EMOJI_SIMPLE),
        "skin": lambda: rng.choice(EMOJI_SKINNABLE) + rng.choice(SKIN_TONES),
        "zwj": lambda: rng.choice(EMOJI_ZWJ),
        "flag": lambda: "".join(
            chr(0x1F1E6 + ord(c) - ord("A")) for c in rng.choice(FLAG_COUNTRIES)
        ),
        "ru": lambda: rng.choice(CHAT_RUSSIAN),
        "hour": lambda: str(rng.randint(1, 11)),
        "street": lambda: rng.choice(CHAT_STREETS),
    }
    return f"{rng.choice(CHAT_USERS)}: {expand(rng.choice(CHAT_MESSAGES), slots)}"


def emoji_chat_text(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    return fill_to_size(n_bytes, lambda: _chat_line(rng), lambda: "\n") + "\n"


# --------------------------------------------------------------------------- code

CODE_WORDS = _words("""
    user count buffer index total node value item size name
    offset length result token cache queue parent child key data
""")
CODE_COMMENTS = _phrases("""
    TODO: handle the empty case | fast path | see issue #42
    keep this in sync with the header | FIXME: off by one? | avoid overflow
    cached for speed | must be a power of two | NOTE: caller owns the memory
    hack, remove later
""")
CODE_STRINGS = _phrases(r"""
    hello, world | error: %s\n | done | utf-8 | key=%d | <unk> | tab\there | ok
""")
CODE_NUMBERS = _words("0 1 2 8 16 42 255 1024 0x1F 0xFF 0x7fff 3.14 1e-6 0.5")


def _num(rng: random.Random) -> str:
    return rng.choice(CODE_NUMBERS)


def _ident(rng: random.Random, style: str) -> str:
    a, b = rng.choice(CODE_WORDS), rng.choice(CODE_WORDS)
    if style == "snake":
        return f"{a}_{b}" if rng.random() < 0.6 else a
    return a + b.capitalize() if rng.random() < 0.6 else a


def _python_snippet(rng: random.Random) -> list[str]:
    ind = "    " if rng.random() < 0.8 else "\t"
    fn, a, b, x = (_ident(rng, "snake") for _ in range(4))
    lines = []
    if rng.random() < 0.4:
        names = [_ident(rng, "snake").upper() for _ in range(rng.randint(2, 4))]
        width = max(len(name) for name in names) + rng.randint(1, 4)
        lines += [f"{name.ljust(width)}= {_num(rng)}" for name in names]
        lines.append("")
    lines += [
        f"def {fn}({a}, {b}=None):",
        f'{ind}"""{rng.choice(CODE_COMMENTS).capitalize()}."""',
        f"{ind}{x} = {a} + {_num(rng)}  # {rng.choice(CODE_COMMENTS)}",
        f"{ind}if {x} >= {_num(rng)} and {b} is not None:",
        f'{ind * 2}print(f"{{{x}}} {rng.choice(CODE_STRINGS)}")',
        f"{ind * 2}return {x} * {_num(rng)}",
        ind + " " * rng.randint(0, 3),  # blank line with trailing whitespace
        f"{ind}for i in range(len({a})):",
        f"{ind * 2}{x} += {a}[i] ** 2 - {_num(rng)}",
    ]
    if rng.random() < 0.5:
        lines += [
            f"{ind}while {x} > {_num(rng)}:",
            f"{ind * 2}{x} //= 2",
            f"{ind * 2}{b} = [{_num(rng)}, {_num(rng)}, {_num(rng)}]",
        ]
    lines.append(f"{ind}return {{'{a}': {x}, \"{b}\": {b}}}")
    return lines


def _c_snippet(rng: random.Random) -> list[str]:
    ind = "\t" if rng.random() < 0.7 else "    "
    fn, a, n, x = (_ident(rng, "camel") for _ in range(4))
    lines = []
    if rng.random() < 0.4:
        names = [_ident(rng, "snake").upper() for _ in range(rng.randint(2, 4))]
        width = max(len(name) for name in names) + rng.randint(2, 6)
        lines += [f"#define {name.ljust(width)}{_num(rng)}" for name in names]
        lines.append("")
    lines += [
        f"/* {rng.choice(CODE_COMMENTS)} */",
        f"static int {fn}(const char *{a}, size_t {n}) {{",
        f"{ind}int {x} = {_num(rng)};{' ' * rng.randint(1, 8)}// {rng.choice(CODE_COMMENTS)}",
        f"{ind}for (size_t i = 0; i < {n}; ++i) {{",
        f"{ind * 2}{x} += {a}[i] ^ {_num(rng)};",
        f"{ind * 2}if ({x} != {_num(rng)} && {a}[i] == '\\0') {{",
        f'{ind * 3}printf("{rng.choice(CODE_STRINGS)}", {x});',
        f"{ind * 3}break;",
        f"{ind * 2}}}",
        f"{ind}}}",
        ind + " " * rng.randint(0, 2),  # blank line with trailing whitespace
        f"{ind}return {x} >> 1 | ({x} << {rng.randint(1, 7)});",
        "}",
    ]
    return lines


def _code_snippet(rng: random.Random) -> str:
    lines = _python_snippet(rng) if rng.random() < 0.5 else _c_snippet(rng)
    if rng.random() < 0.25:  # a Windows-edited snippet: every line ends in \r\n
        return "\r\n".join(lines) + "\r\n"
    out = []
    for line in lines:
        out.append(line + ("\r\n" if rng.random() < 0.03 else "\n"))
    return "".join(out)


def code_text(n_bytes: int, seed: int) -> str:
    rng = random.Random(seed)
    return fill_to_size(
        n_bytes, lambda: _code_snippet(rng), lambda: rng.choice(["\n", "\n\n", "  \n"])
    )


# --------------------------------------------------------------------------- main


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    print(f"wrote {path.relative_to(ROOT)} ({path.stat().st_size:,} bytes)")


def main() -> None:
    write(FIXTURES / "english.txt", english_text(133_000, seed=1))
    write(FIXTURES / "german.txt", german_text(20_000, seed=2))
    write(FIXTURES / "chinese.txt", chinese_text(10_000, seed=3))
    write(FIXTURES / "emoji_chat.txt", emoji_chat_text(10_000, seed=4))
    write(FIXTURES / "code.txt", code_text(20_000, seed=5))
    write(PACKAGE_DATA / "sample.txt", english_text(300_000, seed=6))


if __name__ == "__main__":
    main()
