// The persona voices a campaign can choose from (six English, one Hindi) and the sample line each
// speaks on GET /voices/{id}/sample.mp3. Each carries the SpeechVoice every provider renders it with.
import type { SpeechGender, SpeechVoice } from "../providers/speech/speech.interface.js"

export interface Voice {
  readonly id: string
  readonly name: string
  /** BCP-47 tag of what the persona speaks. */
  readonly language: string
  readonly gender: SpeechGender
  readonly accent: string
  readonly description: string
  /** An in-character opening line; kept well under the speech text cap. */
  readonly sample_text: string
  readonly speech: SpeechVoice
}

/*
 * Personas that share a language and gender must differ in variant, pitch or speed, or they would
 * render identically on providers without per-persona vendor voices (the simulator).
 */
export const VOICES: readonly Voice[] = [
  {
    id: "amelia",
    name: "Amelia",
    language: "en-GB",
    gender: "female",
    accent: "British English",
    description: "Warm and composed; suits utilities, banking and appointment reminders.",
    sample_text:
      "Hi, this is Amelia calling from Harbourside Energy. I'm ringing about a better tariff for your home. Have " +
      "you got a quick minute?",
    speech: { language: "en-GB", gender: "female", pitch: 0.1, speed: 0.95, variant: 1 },
  },
  {
    id: "rohan",
    name: "Rohan",
    language: "en-IN",
    gender: "male",
    accent: "Indian English",
    description: "Friendly and clear; suits lending, insurance and customer follow-ups.",
    sample_text:
      "Hello, this is Rohan calling from Sunrise Home Loans. I wanted to check if you are still looking for a lower " +
      "interest rate on your loan.",
    speech: { language: "en-IN", gender: "male", pitch: -0.1, speed: 1, variant: 2 },
  },
  {
    id: "kai",
    name: "Kai",
    language: "en-US",
    gender: "male",
    accent: "American English",
    description: "Upbeat and direct; suits retail offers, renewals and service bookings.",
    sample_text:
      "Hey there, this is Kai from Summit Auto Care. I'm just calling to confirm your service appointment for " +
      "tomorrow morning at nine.",
    speech: { language: "en-US", gender: "male", pitch: 0, speed: 1.05, variant: 0 },
  },
  {
    id: "anya",
    name: "Anya",
    language: "en-US",
    gender: "female",
    accent: "American English",
    description: "Calm and reassuring; suits healthcare, surveys and account check-ins.",
    sample_text:
      "Hi, this is Anya with Clearpath Health. I'm calling to follow up on your recent visit and see how you're " +
      "feeling. Is now a good time?",
    speech: { language: "en-US", gender: "female", pitch: 0.2, speed: 1, variant: 3 },
  },
  {
    id: "leo",
    name: "Leo",
    language: "en-AU",
    gender: "male",
    accent: "Australian English",
    description: "Relaxed and personable; suits insurance, subscriptions and win-back calls.",
    sample_text:
      "Hi, it's Leo calling from Coastline Insurance. Your policy is up for renewal next week, so I thought I'd " +
      "give you a quick ring.",
    speech: { language: "en-AU", gender: "male", pitch: -0.2, speed: 1, variant: 5 },
  },
  {
    id: "priya",
    name: "Priya",
    language: "en-IN",
    gender: "female",
    accent: "Indian English",
    description: "Bright and polite; suits telecom, education and upgrade offers.",
    sample_text:
      "Hello, this is Priya calling from Lotus Telecom. I'm reaching out about a special upgrade offer on your " +
      "mobile plan. Do you have two minutes?",
    speech: { language: "en-IN", gender: "female", pitch: 0.15, speed: 0.95, variant: 2 },
  },
  {
    id: "meera",
    name: "Meera",
    language: "hi-IN",
    gender: "female",
    accent: "Hindi",
    description: "Gentle and respectful; for Hindi-speaking customers. The sample line is romanised Hindi.",
    sample_text:
      "Namaste, main Meera bol rahi hoon, Lotus Telecom se. Aapke mobile plan par ek khaas offer hai. Kya aapke " +
      "paas do minute hain?",
    speech: { language: "hi-IN", gender: "female", pitch: 0.25, speed: 0.9, variant: 4 },
  },
]

const BY_ID: ReadonlyMap<string, Voice> = new Map(VOICES.map((v) => [v.id, v]))

export function findVoice(id: string): Voice | undefined {
  return BY_ID.get(id)
}
